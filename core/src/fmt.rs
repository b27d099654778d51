//! Internal logging: routes to `defmt` with the `defmt` feature, and to nothing without it.
//!
//! The macros take a format string literal and arguments (defmt syntax: `{}` placeholders).
//! Without `defmt`, the arguments are still borrowed, so a variable used only in a log line
//! does not trigger `unused` warnings, and nothing is formatted or linked.
#![allow(unused_macros)]

macro_rules! trace {
    ($s:literal $(, $x:expr)* $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::trace!($s $(, $x)*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$x; )* }
    }};
}

macro_rules! debug {
    ($s:literal $(, $x:expr)* $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($s $(, $x)*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$x; )* }
    }};
}

macro_rules! warn {
    ($s:literal $(, $x:expr)* $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::warn!($s $(, $x)*);
        #[cfg(not(feature = "defmt"))]
        { $( let _ = &$x; )* }
    }};
}
