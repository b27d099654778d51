//! Fixed-capacity notify id pools (placeholder; filled by the core issue).

/// A notify id pool of capacity `N`.
#[derive(Debug)]
pub struct IdPool<const N: usize> {
    _private: (),
}
