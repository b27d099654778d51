//! Internal logging: routes to `defmt` with the `defmt` feature, and to nothing without it.
#![allow(unused_macros)]

macro_rules! trace {
    ($($arg:expr),* $(,)?) => {
        #[cfg(feature = "defmt")]
        ::defmt::trace!($($arg),*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$arg; )* }
    };
}

macro_rules! debug {
    ($($arg:expr),* $(,)?) => {
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg),*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$arg; )* }
    };
}

macro_rules! warn {
    ($($arg:expr),* $(,)?) => {
        #[cfg(feature = "defmt")]
        ::defmt::warn!($($arg),*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$arg; )* }
    };
}
