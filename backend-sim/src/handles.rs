//! Process-local handle tables: a slab whose `u64` handles carry the slot index, a per-slot
//! generation and a per-table tag, so stale, foreign and garbage handles are told apart from
//! live ones on every call (and answered with 107017 by the caller).

/// A table of `T`s addressed by opaque, never-zero `u64` handles:
/// `tag (16 bits) | generation (16 bits) | index + 1 (32 bits)`.
#[derive(Debug)]
pub struct Slab<T> {
    tag: u16,
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
}

#[derive(Debug)]
struct Entry<T> {
    generation: u16,
    value: Option<T>,
}

impl<T> Slab<T> {
    /// An empty table whose handles carry `tag` (distinct per table, so a handle of one
    /// table, or of another `Sim`, is rejected by the others).
    pub fn new(tag: u16) -> Self {
        Slab {
            tag,
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The tag every handle of this table carries (bits 48‥63).
    pub fn tag(&self) -> u16 {
        self.tag
    }

    fn encode(&self, index: u32, generation: u16) -> u64 {
        (u64::from(self.tag) << 48) | (u64::from(generation) << 32) | (u64::from(index) + 1)
    }

    fn decode(&self, handle: u64) -> Option<(usize, u16)> {
        let low = handle as u32;
        if low == 0 || (handle >> 48) as u16 != self.tag {
            return None;
        }
        Some(((low - 1) as usize, (handle >> 32) as u16))
    }

    /// Stores `value`; `None` if the table is full (2³² − 1 entries).
    pub fn insert(&mut self, value: T) -> Option<u64> {
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            e.value = Some(value);
            let g = e.generation;
            return Some(self.encode(i, g));
        }
        let i = u32::try_from(self.entries.len())
            .ok()
            .filter(|&i| i < u32::MAX)?;
        self.entries.push(Entry {
            generation: 1,
            value: Some(value),
        });
        Some(self.encode(i, 1))
    }

    /// The value of a live handle.
    pub fn get(&self, handle: u64) -> Option<&T> {
        let (i, g) = self.decode(handle)?;
        let e = self.entries.get(i)?;
        if e.generation == g {
            e.value.as_ref()
        } else {
            None
        }
    }

    /// The value of a live handle, mutably.
    pub fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        let (i, g) = self.decode(handle)?;
        let e = self.entries.get_mut(i)?;
        if e.generation == g {
            e.value.as_mut()
        } else {
            None
        }
    }

    /// Removes a live handle's value; the handle (and every copy of it) is stale afterwards.
    pub fn remove(&mut self, handle: u64) -> Option<T> {
        let (i, g) = self.decode(handle)?;
        let e = self.entries.get_mut(i)?;
        if e.generation != g {
            return None;
        }
        let v = e.value.take()?;
        // Generation 0 is skipped so that a handle is never all-zero in its upper half by
        // accident of wrapping.
        e.generation = e.generation.wrapping_add(1).max(1);
        self.free.push(i as u32);
        Some(v)
    }

    /// Removes every value that satisfies `pred`; their handles are stale afterwards.
    pub fn remove_where(&mut self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            if e.value.as_ref().is_some_and(&mut pred) {
                e.generation = e.generation.wrapping_add(1).max(1);
                out.extend(e.value.take());
                self.free.push(i as u32);
            }
        }
        out
    }

    /// Removes every value.
    pub fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter_mut().enumerate() {
            if let Some(v) = e.value.take() {
                e.generation = e.generation.wrapping_add(1).max(1);
                self.free.push(i as u32);
                out.push(v);
            }
        }
        out
    }

    /// Live values.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_garbage_handles_are_rejected() {
        let mut a = Slab::new(0x1234);
        let b: Slab<u32> = Slab::new(0x4321);
        let h = a.insert(7u32).unwrap();
        assert_ne!(h, 0);
        assert_eq!(a.get(h), Some(&7));
        assert_eq!(b.get(h), None, "foreign table");
        assert_eq!(a.get(0), None);
        assert_eq!(a.get(h ^ (1 << 40)), None, "wrong generation");
        assert_eq!(a.get(h + 1), None, "index out of range");
        assert_eq!(a.remove(h), Some(7));
        assert_eq!(a.get(h), None, "stale");
        assert_eq!(a.remove(h), None);
        let h2 = a.insert(8).unwrap();
        assert_ne!(h, h2, "a reused index gets a new generation");
        assert_eq!(a.get(h), None);
        *a.get_mut(h2).unwrap() = 9;
        assert_eq!(a.len(), 1);
        let h3 = a.insert(10).unwrap();
        assert_eq!(a.remove_where(|v| *v == 10), vec![10]);
        assert_eq!(a.get(h3), None, "removed by remove_where");
        assert_eq!(a.tag(), 0x1234);
        assert_eq!(a.drain(), vec![9]);
        assert_eq!(a.get(h2), None);
        assert_eq!(a.len(), 0);
    }
}
