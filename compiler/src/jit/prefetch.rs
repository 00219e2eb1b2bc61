//! Prefetch instructions for the Cranelift tier, which has none.
//!
//! A hint (`ir::Stmt::PrefetchStream`, `PrefetchGather`) is translated as
//! a one-byte load of the address it names, with a debug tag of its own
//! (`emit`). Cranelift places a function's debug tags at the start of each
//! machine instruction lowered from the tagged instruction. Once the
//! function is compiled, the hint's load, a `movzx` from that address, is
//! rewritten in place into `prefetcht0` of the same address (`rewrite`):
//! the same length, the same addressing bytes, another opcode. The C
//! tier's `__builtin_prefetch` is that instruction.
//!
//! Why this is sound:
//! - The load's value is never used, so no instruction reads the
//!   register it no longer writes.
//! - The load may trap (no `notrap` flag), so Cranelift neither removes
//!   it nor moves it (`has_side_effect`), and it keeps its tag.
//! - No other load of a kernel is a one-byte load, so Cranelift's alias
//!   analysis, which merges loads of the same address, type and
//!   extension, never gives another load its value.
//! - A prefetch never faults, whatever it names: hints may name
//!   addresses past an array's end (a stream's last rows).
//! - Every hint must have exactly one load rewritten, else the whole
//!   function is refused (and compiled again without hints by
//!   `jit::build`): no hint is left a load that could fault.
//!
//! On this repository's Intel and AMD hosts, Cranelift kernels gained as
//! the C's did from the same hints; see `ir::streams`, `ir::gathers` and
//! `ir::block_streams` for where they are asked.

use super::call::{SLOT_LEN, SLOT_SIZE};
use super::translate::{flags, pure, Translator};
use crate::ir::{ArrayRef, Expr, Function, Stmt};
use cranelift_codegen::ir::{types, DebugTag, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module, ModuleReloc};

/// A hint for the cache line at `address + offset`, the `id`th of its
/// function (from 0).
pub(super) fn emit(b: &mut FunctionBuilder, address: Value, offset: i32, id: u32) {
    // Not `notrap`: a load that may trap has a side effect, which keeps it.
    let v = b
        .ins()
        .uload8(types::I32, MemFlagsData::new(), address, offset);
    let inst = b.func.dfg.value_def(v).unwrap_inst(); // ok: an instruction's result
    b.func.debug_tags.set(inst, [DebugTag::User(id)]);
}

impl Translator<'_, '_> {
    /// Hints for the cache lines of `array[at..at + positions]`
    /// (`jit::prefetch`): no element is read, so `at` may lie past the
    /// array's end.
    pub(super) fn prefetch_stream(
        &mut self,
        array: &ArrayRef,
        at: &Expr,
        positions: i64,
    ) -> Result<(), String> {
        let (address, offset) = self.address_at(array, at)?;
        let bytes = positions.saturating_mul(array.elem().bytes() as i64);
        for line in (0..bytes.min(MAX_HINT_BYTES)).step_by(64) {
            let offset = offset
                .checked_add(line as i32)
                .ok_or("hint offset out of range")?;
            self.hint(address, offset);
        }
        Ok(())
    }

    /// A hint for `array[coords[at]]` (`jit::prefetch`). The coordinate is
    /// read at `at` or at the last position, whichever comes first: a
    /// loop over positions up to `coords`' length asks ahead of its last
    /// ones, and reads nothing past the end of `coords`.
    pub(super) fn prefetch_gather(
        &mut self,
        array: &ArrayRef,
        coords: &ArrayRef,
        at: &Expr,
    ) -> Result<(), String> {
        let at = self.expr(at)?;
        let slot = self.array(coords)?.slot;
        let table = self.table();
        let off = (slot * SLOT_SIZE) as i32 + SLOT_LEN;
        let len = self.b.ins().load(types::I64, pure(), table, off);
        let last = self.b.ins().iadd_imm_s(len, -1);
        let q = self.b.ins().smin(at, last);
        let base = self.base(coords)?;
        let address = self.element(base, coords, q);
        let c = self.b.ins().sload32(flags().with_readonly(), address, 0);
        let base = self.base(array)?;
        let address = self.element(base, array, c);
        self.hint(address, 0);
        Ok(())
    }

    fn hint(&mut self, address: Value, offset: i32) {
        emit(self.b, address, offset, self.hints);
        self.hints += 1;
    }
}

/// The most bytes one hint asks for: a block of 4x4 `f64` values and more
/// (`ir::block_streams` asks for up to 4,096 elements).
const MAX_HINT_BYTES: i64 = 4096;

/// Compile the function in `ctx`, which holds `hints` hints, rewrite
/// their loads into prefetches, and define it in `module` as `id`; or,
/// where some hint has no load to rewrite, define nothing: `false`.
pub(super) fn define(
    module: &mut JITModule,
    id: FuncId,
    ctx: &mut Context,
    hints: u32,
) -> Result<bool, String> {
    ctx.compile(module.isa(), &mut Default::default())
        .map_err(|e| format!("cranelift: {:?}", e.inner))?;
    let compiled = ctx.compiled_code().ok_or("cranelift: no code")?;
    let mut code = compiled.code_buffer().to_vec();
    let tags = compiled
        .buffer
        .debug_tags()
        .map(|t| (t.offset as usize, t.tags));
    if !rewrite(&mut code, hints, tags) {
        return Ok(false);
    }
    // What `Module::define_function` does with the code as compiled.
    let relocs: Vec<_> = compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    let alignment = u64::from(compiled.buffer.alignment);
    module
        .define_function_bytes(id, alignment, &code, &relocs)
        .map_err(|e| format!("cranelift: {e:?}"))?;
    Ok(true)
}

/// `f` without its hints.
pub(super) fn without_hints(f: &Function) -> Function {
    fn strip(b: &mut crate::ir::Block) {
        b.retain(|s| !matches!(s, Stmt::PrefetchStream { .. } | Stmt::PrefetchGather { .. }));
        for inner in b.iter_mut().flat_map(crate::ir::nested_blocks_mut) {
            strip(inner);
        }
    }
    let mut g = f.clone();
    strip(&mut g.body);
    g
}

/// Rewrite, in `code`, each of the `hints` hints' loads into a prefetch,
/// given the compiled function's debug tags (offset, tags); whether each
/// hint had exactly one load rewritten (else `code` must not run).
pub(super) fn rewrite<'t>(
    code: &mut [u8],
    hints: u32,
    tags: impl IntoIterator<Item = (usize, &'t [DebugTag])>,
) -> bool {
    let mut rewritten = vec![0u32; hints as usize];
    for (offset, tags) in tags {
        let [DebugTag::User(id)] = tags else { continue };
        // The hint's other instructions compute its address.
        let Some(count) = rewritten.get_mut(*id as usize) else {
            return false;
        };
        if let Some(load) = code.get_mut(offset..) {
            if rewrite_load(load) {
                *count += 1;
            }
        }
    }
    rewritten.iter().all(|&n| n == 1)
}

/// Rewrite the load at the start of `code`, `movzx r, byte [mem]` (an
/// optional REX prefix, `0F B6`, a ModRM byte naming memory, and its SIB
/// byte and displacement, which stay), into `prefetcht0 [mem]` (`0F 18
/// /1`); whether `code` started with such a load.
fn rewrite_load(code: &mut [u8]) -> bool {
    let rex = matches!(code.first(), Some(0x40..=0x4f));
    let op = usize::from(rex);
    let (Some([0x0f, 0xb6]), Some(&modrm)) = (code.get(op..op + 2), code.get(op + 2)) else {
        return false;
    };
    if modrm >> 6 == 3 {
        // A register, not memory.
        return false;
    }
    if rex {
        // REX.W and REX.R widen and name the destination, which a prefetch
        // has not; REX.X and REX.B extend the address's registers and stay.
        code[0] = 0x40 | (code[0] & 0x03);
    }
    code[op + 1] = 0x18;
    code[op + 2] = (modrm & 0xc7) | (1 << 3);
    true
}

/// Cranelift's disassembly `text` as the code runs: each hint's load,
/// the line before its debug tag's note, shown as the prefetch it becomes
/// (`movzbq 0x800(%rcx, %rdx), %rdi` as `prefetcht0 0x800(%rcx, %rdx)`),
/// without the note. Other tagged lines (a hint's address) lose the note.
pub(super) fn shown_as_run(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("; ^-- debug @") {
            if let Some(last) = out.last_mut() {
                *last = as_prefetch(last).unwrap_or_else(|| last.clone());
            }
            continue;
        }
        out.push(line.to_string());
    }
    out.join("\n") + "\n"
}

/// `movzb* ADDRESS, %reg` as `prefetcht0 ADDRESS`, with its indent.
fn as_prefetch(line: &str) -> Option<String> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let (mnemonic, operands) = body.split_once(' ')?;
    if !mnemonic.starts_with("movzb") {
        return None;
    }
    let (address, _register) = operands.rsplit_once(", %")?;
    Some(format!("{indent}prefetcht0 {address}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(bytes: &[u8], tags: &[(usize, u32)], hints: u32) -> Option<Vec<u8>> {
        let mut code = bytes.to_vec();
        let tags: Vec<(usize, [DebugTag; 1])> = tags
            .iter()
            .map(|&(at, id)| (at, [DebugTag::User(id)]))
            .collect();
        let tags = tags.iter().map(|(at, t)| (*at, &t[..]));
        rewrite(&mut code, hints, tags).then_some(code)
    }

    #[test]
    fn loads_of_every_addressing_form_become_prefetches() {
        // movzbq (%rax), %rcx
        let load = [0x48, 0x0f, 0xb6, 0x08];
        assert_eq!(
            rewritten(&load, &[(0, 0)], 1),
            Some(vec![0x40, 0x0f, 0x18, 0x08])
        );
        // movzbl 0x10(%rdi), %eax
        let load = [0x0f, 0xb6, 0x47, 0x10];
        assert_eq!(
            rewritten(&load, &[(0, 0)], 1),
            Some(vec![0x0f, 0x18, 0x4f, 0x10])
        );
        // movzbq 0x100(%r8,%r9,8), %r10: REX.WRXB
        let load = [0x4f, 0x0f, 0xb6, 0x94, 0xc8, 0x00, 0x01, 0x00, 0x00];
        let prefetch = [0x43, 0x0f, 0x18, 0x8c, 0xc8, 0x00, 0x01, 0x00, 0x00];
        assert_eq!(rewritten(&load, &[(0, 0)], 1), Some(prefetch.to_vec()));
    }

    #[test]
    fn two_hints_between_other_code_each_rewrite_their_load() {
        // movzbq 0x800(%rcx,%rdx,1), %rdi; movzbq 0x840(%rcx,%rdx,1),
        // %rcx; mov 0x10(%rsp), %rbx: a register allocator's reload, no
        // tag.
        let code = [
            0x48, 0x0f, 0xb6, 0xbc, 0x11, 0x00, 0x08, 0x00, 0x00, 0x48, 0x0f, 0xb6, 0x8c, 0x11,
            0x40, 0x08, 0x00, 0x00, 0x48, 0x8b, 0x5c, 0x24, 0x10,
        ];
        let out = rewritten(&code, &[(0, 0), (9, 1)], 2).expect("both rewritten"); // ok: test code
        assert_eq!(out[..4], [0x40, 0x0f, 0x18, 0x8c]);
        assert_eq!(out[9..13], [0x40, 0x0f, 0x18, 0x8c]);
        assert_eq!(out[13..], code[13..]);
    }

    #[test]
    fn the_disassembly_shows_prefetches() {
        let text = "  shlq $0x7, %rdx\n  movzbq 0x800(%rcx, %rdx), %rdi\n  ; ^-- debug @ Pre: [User(0)]\n  movq 0x10(%rsp), %rbx\n";
        assert_eq!(
            shown_as_run(text),
            "  shlq $0x7, %rdx\n  prefetcht0 0x800(%rcx, %rdx)\n  movq 0x10(%rsp), %rbx\n"
        );
    }

    #[test]
    fn a_hint_without_exactly_one_load_refuses_the_function() {
        let load = [0x0f, 0xb6, 0x47, 0x10];
        // Its tag on other code only: movzbq %al, %rax (no memory), then
        // mov (%rax), %rcx.
        assert_eq!(rewritten(&[0x48, 0x0f, 0xb6, 0xc0], &[(0, 0)], 1), None);
        assert_eq!(rewritten(&[0x48, 0x8b, 0x08], &[(0, 0)], 1), None);
        // A load cut short.
        assert_eq!(rewritten(&[0x0f, 0xb6], &[(0, 0)], 1), None);
        // A second hint never seen.
        assert_eq!(rewritten(&load, &[(0, 0)], 2), None);
        // A tag of no hint.
        assert_eq!(rewritten(&load, &[(0, 5)], 1), None);
        // The same hint twice.
        let two = [load, load].concat();
        assert_eq!(rewritten(&two, &[(0, 0), (4, 0)], 1), None);
    }
}
