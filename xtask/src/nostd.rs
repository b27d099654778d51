//! `cargo xtask check-nostd` (the core builds and links without `std` or an allocator, with and
//! without `defmt`) and `cargo xtask size` (what the core costs in a linked firmware image).
//!
//! Both build for `aarch64-unknown-none` (the AICPU's architecture), whose sysroot has no
//! `std`: a crate in the graph that uses `std` fails to compile there, which is the primary
//! proof. On top of that, `check-nostd` reads the dependency tree and rejects any target crate
//! built with a `std`/`alloc` feature (a proc-macro's subtree runs on the host and may use
//! `std`), and links the firmware probe `core/firmware-size` — a `no_main` binary without a
//! global allocator, so a dependency that pulls in `alloc` fails to link.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use argh::FromArgs;

use crate::run::{Steps, cargo, root, status};

/// The AICPU's target: bare-metal AArch64, `core` and `alloc` only.
const TARGET: &str = "aarch64-unknown-none";
const CORE: &str = "acl-notify-core";
const PROBE_DIR: &str = "core/firmware-size";
const PROBE_BIN: &str = "acl-notify-firmware-size";

/// Build the core for aarch64-unknown-none (with and without defmt) and fail if anything
/// pulls in std.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "check-nostd")]
pub struct CheckNostdArgs {}

/// Print the code size of the core built for aarch64-unknown-none, as linked by a small
/// firmware-style user of its whole API.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "size")]
pub struct SizeArgs {
    /// also build the probe with the core's `defmt` feature (every log level compiled in)
    /// and report that image too
    #[argh(switch)]
    pub defmt: bool,
}

pub fn check_nostd(_: &CheckNostdArgs) -> Result<(), String> {
    ensure_target()?;
    let mut steps = Steps::default();
    for flavour in [Flavour::Plain, Flavour::Defmt] {
        steps.run(
            &format!("build {CORE} for {TARGET}{}", flavour.label()),
            || {
                let mut c = cargo();
                c.args(["build", "--quiet", "-p", CORE, "--lib", "--target", TARGET]);
                c.args(flavour.feature_args());
                status(&mut c)
            },
        );
        steps.run(
            &format!("no std/alloc features in the tree{}", flavour.label()),
            || check_tree(flavour),
        );
        steps.run(
            &format!("link the firmware probe{}", flavour.label()),
            || build_probe(flavour).map(drop),
        );
    }
    steps.finish("check-nostd")
}

pub fn size(args: &SizeArgs) -> Result<(), String> {
    ensure_target()?;
    let mut flavours = vec![Flavour::Plain];
    if args.defmt {
        flavours.push(Flavour::Defmt);
    }
    for flavour in flavours {
        let elf_path = build_probe(flavour)?;
        let bytes =
            fs::read(&elf_path).map_err(|e| format!("cannot read {}: {e}", elf_path.display()))?;
        let elf = Elf::parse(&bytes)?;
        print_image(&elf, &elf_path, flavour);
    }
    print_pool_table();
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// No features.
    Plain,
    /// The core's `defmt` feature.
    Defmt,
}

impl Flavour {
    fn label(self) -> &'static str {
        match self {
            Flavour::Plain => "",
            Flavour::Defmt => " (defmt)",
        }
    }

    fn feature_args(self) -> &'static [&'static str] {
        match self {
            Flavour::Plain => &[],
            Flavour::Defmt => &["--features", "defmt"],
        }
    }
}

/// Installs the target with rustup if the pinned toolchain lacks it.
fn ensure_target() -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(root())
        .output()
        .map_err(|e| format!("could not run rustup: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`rustup target list --installed` failed with {}",
            out.status
        ));
    }
    if String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    eprintln!("xtask: installing the {TARGET} target");
    status(
        Command::new("rustup")
            .args(["target", "add", TARGET])
            .current_dir(root()),
    )
}

/// Rejects target crates (outside proc-macro subtrees) built with a `std` or `alloc` feature.
fn check_tree(flavour: Flavour) -> Result<(), String> {
    let mut c = cargo();
    c.args(["tree", "-p", CORE, "--target", TARGET, "-e", "normal"]);
    c.args(["--prefix", "depth", "--format", "{p}|{f}"]);
    c.args(flavour.feature_args());
    let out = c
        .output()
        .map_err(|e| format!("could not run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let offenders = std_features(&String::from_utf8_lossy(&out.stdout));
    if offenders.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "crates built for {TARGET} with std/alloc features: {}",
            offenders.join("; ")
        ))
    }
}

/// Parses `cargo tree --prefix depth --format '{p}|{f}'` output and returns each target
/// crate that has a `std`/`alloc`-like feature enabled. Subtrees of proc-macros are host code.
fn std_features(tree: &str) -> Vec<String> {
    let mut offenders = Vec::new();
    let mut host_below: Option<usize> = None;
    for line in tree.lines() {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let Ok(depth) = line[..digits].parse::<usize>() else {
            continue;
        };
        let rest = &line[digits..];
        let (pkg, features) = rest.split_once('|').unwrap_or((rest, ""));
        if let Some(d) = host_below {
            if depth > d {
                continue;
            }
            host_below = None;
        }
        if pkg.contains("(proc-macro)") {
            host_below = Some(depth);
            continue;
        }
        let bad: Vec<&str> = features
            .trim_end_matches(" (*)")
            .split(',')
            .map(str::trim)
            .filter(|f| {
                f.split(['_', '-'])
                    .any(|word| word == "std" || word == "alloc")
            })
            .collect();
        if !bad.is_empty() {
            offenders.push(format!("{} [{}]", pkg.trim(), bad.join(",")));
        }
    }
    offenders
}

/// Builds the firmware probe (release, opt-level "s", LTO) and returns the ELF's path.
fn build_probe(flavour: Flavour) -> Result<PathBuf, String> {
    let target_dir = crate::build::target_dir()?.join(match flavour {
        Flavour::Plain => "firmware-size",
        Flavour::Defmt => "firmware-size-defmt",
    });
    let mut c = cargo();
    c.current_dir(root().join(PROBE_DIR));
    c.args([
        "build",
        "--quiet",
        "--release",
        "--target",
        TARGET,
        "--target-dir",
    ]);
    c.arg(&target_dir);
    c.args(flavour.feature_args());
    if flavour == Flavour::Defmt {
        // defmt's linker script places its interned strings; every log level compiled in so
        // the figure includes all of the core's logging.
        c.env(
            "CARGO_TARGET_AARCH64_UNKNOWN_NONE_RUSTFLAGS",
            "-C link-arg=-Tdefmt.x",
        );
        c.env("DEFMT_LOG", "trace");
    }
    status(&mut c)?;
    Ok(target_dir.join(TARGET).join("release").join(PROBE_BIN))
}

fn print_image(elf: &Elf, path: &Path, flavour: Flavour) {
    let s = elf.summary();
    println!(
        "firmware probe{} — {CORE} linked for {TARGET} (release, opt-level \"s\", LTO):",
        flavour.label()
    );
    println!("  {}", path.display());
    println!("  code (.text)          {:>9} bytes", s.text);
    println!("  read-only data        {:>9} bytes", s.rodata);
    println!("  unwind tables         {:>9} bytes", s.unwind);
    println!("  initialised data      {:>9} bytes", s.data);
    println!(
        "  flash total           {:>9} bytes   (code + read-only + unwind + data)",
        s.text + s.rodata + s.unwind + s.data
    );
    println!("  zero-initialised .bss {:>9} bytes", s.bss);
    if s.defmt > 0 {
        println!(
            "  .defmt (host-side)    {:>9} bytes   (not loaded)",
            s.defmt
        );
    }
    let core_fns: u64 = elf
        .symbols
        .iter()
        .filter(|s| s.is_func && is_core_symbol(&s.name))
        .map(|s| s.size)
        .sum();
    println!(
        "  of the code, out-of-line {CORE} functions: {core_fns} bytes (the rest of the core is inlined into its callers)"
    );
    let mut statics: Vec<&Symbol> = elf
        .symbols
        .iter()
        .filter(|s| s.name.starts_with("FW_"))
        .collect();
    statics.sort_by(|a, b| a.name.cmp(&b.name));
    println!("  statics in the image:");
    for s in statics {
        println!("    {:<16} {:>9} bytes", s.name, s.size);
    }
    println!();
}

/// Whether a (legacy-mangled) symbol is an item of the core: its path starts with the crate,
/// or it is a trait impl for one of the core's types.
fn is_core_symbol(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("_ZN") else {
        return name.contains("15acl_notify_core");
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    rest.starts_with("acl_notify_core") || rest.starts_with("_$LT$acl_notify_core..")
}

fn print_pool_table() {
    fn row<C: SocType>() {
        let n = C::MAX_NOTIFIES;
        let (plain, spin, atomic) = (
            size_of::<C::NotifyPool>(),
            size_of::<C::SpinNotifyPool>(),
            size_of::<C::AtomicNotifyPool>(),
        );
        println!(
            "  {:<14} {:>6} {:>12} {:>12} {:>14}",
            C::SOC.name(),
            n,
            plain,
            spin,
            atomic
        );
    }
    println!("static size of each SoC's notify id pool (bytes; the same on every 64-bit target):");
    println!(
        "  {:<14} {:>6} {:>12} {:>12} {:>14}",
        "SoC", "ids", "IdPool", "SpinIdPool", "AtomicIdPool"
    );
    use acl_notify_core::soc::*;
    row::<Ascend950PR>();
    row::<Ascend950DT>();
    row::<Ascend910_93>();
    row::<Ascend910B>();
    row::<Ascend310B>();
    row::<Ascend310P>();
    row::<Ascend910>();
    row::<IPV350>();
}

// ---------------------------------------------------------------------------------------------
// A minimal ELF64 little-endian reader: section headers and the symbol table.
// ---------------------------------------------------------------------------------------------

const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SHF_WRITE: u64 = 1;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const STT_FUNC: u8 = 2;

#[derive(Debug)]
struct Section {
    name: String,
    kind: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
}

#[derive(Debug)]
struct Symbol {
    name: String,
    size: u64,
    is_func: bool,
}

#[derive(Debug)]
struct Elf {
    sections: Vec<Section>,
    symbols: Vec<Symbol>,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Summary {
    text: u64,
    rodata: u64,
    unwind: u64,
    data: u64,
    bss: u64,
    defmt: u64,
}

fn rd<const K: usize>(b: &[u8], at: u64) -> Result<[u8; K], String> {
    let at = usize::try_from(at).map_err(|_| "ELF offset out of range")?;
    b.get(at..at + K)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| format!("ELF truncated at {at:#x}"))
}
fn u16_at(b: &[u8], at: u64) -> Result<u16, String> {
    rd::<2>(b, at).map(u16::from_le_bytes)
}
fn u32_at(b: &[u8], at: u64) -> Result<u32, String> {
    rd::<4>(b, at).map(u32::from_le_bytes)
}
fn u64_at(b: &[u8], at: u64) -> Result<u64, String> {
    rd::<8>(b, at).map(u64::from_le_bytes)
}

fn c_str(b: &[u8], at: u64) -> String {
    let start = usize::try_from(at).unwrap_or(usize::MAX).min(b.len());
    let end = b[start..]
        .iter()
        .position(|&c| c == 0)
        .map_or(b.len(), |n| start + n);
    String::from_utf8_lossy(&b[start..end]).into_owned()
}

impl Elf {
    fn parse(b: &[u8]) -> Result<Elf, String> {
        if b.get(..4) != Some(b"\x7fELF") {
            return Err("not an ELF file".into());
        }
        if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
            return Err("not a 64-bit little-endian ELF".into());
        }
        let shoff = u64_at(b, 0x28)?;
        let shentsize = u64::from(u16_at(b, 0x3a)?);
        let shnum = u64::from(u16_at(b, 0x3c)?);
        let shstrndx = u64::from(u16_at(b, 0x3e)?);
        if shentsize < 64 {
            return Err("ELF section header entries too small".into());
        }
        let mut raw = Vec::new();
        for i in 0..shnum {
            let h = shoff + i * shentsize;
            raw.push((
                u32_at(b, h)?,
                Section {
                    name: String::new(),
                    kind: u32_at(b, h + 4)?,
                    flags: u64_at(b, h + 8)?,
                    offset: u64_at(b, h + 24)?,
                    size: u64_at(b, h + 32)?,
                    link: u32_at(b, h + 40)?,
                },
            ));
        }
        let names_at = raw
            .get(shstrndx as usize)
            .map(|(_, s)| s.offset)
            .ok_or("ELF has no section name table")?;
        let sections: Vec<Section> = raw
            .into_iter()
            .map(|(name, mut s)| {
                s.name = c_str(b, names_at + u64::from(name));
                s
            })
            .collect();
        let mut symbols = Vec::new();
        for symtab in sections.iter().filter(|s| s.kind == SHT_SYMTAB) {
            let strtab = sections
                .get(symtab.link as usize)
                .ok_or("symbol table without string table")?;
            for i in 0..symtab.size / 24 {
                let e = symtab.offset + i * 24;
                let info = rd::<1>(b, e + 4)?[0];
                symbols.push(Symbol {
                    name: c_str(b, strtab.offset + u64::from(u32_at(b, e)?)),
                    size: u64_at(b, e + 16)?,
                    is_func: info & 0xf == STT_FUNC,
                });
            }
        }
        Ok(Elf { sections, symbols })
    }

    /// Sums loaded sections by kind (by flags, so both merged `.text` and per-function
    /// `.text.*` layouts count the same), plus the host-side `.defmt` table.
    fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for sec in &self.sections {
            if sec.flags & SHF_ALLOC == 0 {
                if sec.name == ".defmt" {
                    s.defmt += sec.size;
                }
                continue;
            }
            let slot = if sec.flags & SHF_EXECINSTR != 0 {
                &mut s.text
            } else if sec.kind == SHT_NOBITS {
                &mut s.bss
            } else if sec.flags & SHF_WRITE != 0 {
                &mut s.data
            } else if sec.name.starts_with(".eh_frame") {
                &mut s.unwind
            } else {
                &mut s.rodata
            };
            *slot += sec.size;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_parsing_skips_proc_macros_and_flags_std() {
        let tree = "\
0acl-notify-core v0.1.0 (/x/core)|default,defmt
1defmt v1.2.0|
2defmt-macros v1.2.0 (proc-macro)|
3thiserror v2.0.21|default,std
1heapless v0.9.4|defmt
1memchr v2.7.0|use_std
1spin v0.12.3|mutex,once,spin_mutex (*)
1evil v1.0.0|alloc
";
        assert_eq!(
            std_features(tree),
            ["memchr v2.7.0 [use_std]", "evil v1.0.0 [alloc]"]
        );
        assert!(std_features("0a v1|default\n1b v1 (proc-macro)|\n2c v1|std\n").is_empty());
    }

    /// A hand-built ELF: null, .text (exec), .rodata, .bss (nobits, write), .shstrtab.
    fn tiny_elf() -> Vec<u8> {
        let names = b"\0.text\0.rodata\0.bss\0.shstrtab\0";
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        let names_off = b.len() as u64;
        b.extend_from_slice(names);
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        let shoff = b.len() as u64;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&5u16.to_le_bytes());
        b[0x3e..0x40].copy_from_slice(&4u16.to_le_bytes());
        let mut sh = |name: u32, kind: u32, flags: u64, off: u64, size: u64| {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[8..16].copy_from_slice(&flags.to_le_bytes());
            h[24..32].copy_from_slice(&off.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&h);
        };
        sh(0, 0, 0, 0, 0);
        sh(1, 1, SHF_ALLOC | SHF_EXECINSTR, 0, 100);
        sh(7, 1, SHF_ALLOC, 0, 20);
        sh(15, SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 0, 4096);
        sh(20, 3, 0, names_off, names.len() as u64);
        b
    }

    #[test]
    fn elf_sections_are_summed_by_kind() {
        let elf = Elf::parse(&tiny_elf()).unwrap();
        let names: Vec<&str> = elf.sections.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["", ".text", ".rodata", ".bss", ".shstrtab"]);
        assert_eq!(
            elf.summary(),
            Summary {
                text: 100,
                rodata: 20,
                bss: 4096,
                ..Summary::default()
            }
        );
    }

    #[test]
    fn elf_garbage_is_an_error() {
        assert!(Elf::parse(b"not an elf").is_err());
        let mut t = tiny_elf();
        t.truncate(200);
        assert!(Elf::parse(&t).is_err());
    }

    #[test]
    fn core_symbols_are_recognised() {
        assert!(is_core_symbol(
            "_ZN15acl_notify_core3key9ExportKey5parse17h303d63faba4aeeaeE"
        ));
        assert!(is_core_symbol(
            "_ZN76_$LT$acl_notify_core..error..Error$u20$as$u20$num_enum..TryFromPrimitive$GT$18try_from_primitive17he1a642de80708137E"
        ));
        assert!(!is_core_symbol(
            "_ZN90_$LT$acl_notify_firmware_size..Fw$u20$as$u20$acl_notify_core..backend..NotifyResources$GT$10export_key17h825466a418608dc2E"
        ));
        assert!(!is_core_symbol("memcpy"));
    }
}
