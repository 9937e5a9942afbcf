"""A small SPIR-V binary module builder (no external tool needed).

Instructions are encoded as the SPIR-V specification §2.3 "Physical Layout of a SPIR-V Module
and Instruction" describes: a word ``wordcount << 16 | opcode`` followed by the operands, each
one 32-bit word (ids, literals, enumerants) or a nul-terminated UTF-8 string padded to a word.
Opcode and enumerant numbers are the Khronos SPIR-V 1.6 unified headers' values
(``spirv.core.grammar.json``); ``spirv-dis`` on the output reads back every name used here
(tests/test_vulkan_spirv.py).

The builder keeps the module's logical sections apart (capabilities ... types/constants/globals,
functions) and deduplicates types and constants, so a lowering can ask for ``uint`` or the
constant ``7u`` wherever it needs one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

MAGIC = 0x07230203
#: SPIR-V 1.5 (Vulkan 1.2 and newer consume it)
VERSION = 0x00010500
#: generator word: 0 = unregistered tool; the low half is our own version
GENERATOR = 0x00000001

OP: dict[str, int] = {
    "Nop": 0, "Name": 5, "Extension": 10, "ExtInstImport": 11, "ExtInst": 12, "MemoryModel": 14,
    "EntryPoint": 15, "ExecutionMode": 16, "Capability": 17, "TypeVoid": 19, "TypeBool": 20,
    "TypeInt": 21, "TypeFloat": 22, "TypeVector": 23, "TypeArray": 28, "TypeRuntimeArray": 29,
    "TypeStruct": 30, "TypePointer": 32, "TypeFunction": 33, "ConstantTrue": 41, "ConstantFalse": 42,
    "Constant": 43, "ConstantComposite": 44, "ConstantNull": 46, "SpecConstant": 50, "SpecConstantComposite": 51,
    "Function": 54, "FunctionEnd": 56, "Variable": 59, "Load": 61, "Store": 62, "AccessChain": 65,
    "Decorate": 71, "MemberDecorate": 72, "CompositeConstruct": 80, "CompositeExtract": 81,
    "ConvertFToU": 109, "ConvertFToS": 110, "ConvertSToF": 111, "ConvertUToF": 112, "UConvert": 113,
    "SConvert": 114, "FConvert": 115, "Bitcast": 124, "SNegate": 126, "FNegate": 127, "IAdd": 128,
    "FAdd": 129, "ISub": 130, "FSub": 131, "IMul": 132, "FMul": 133, "UDiv": 134, "SDiv": 135,
    "FDiv": 136, "UMod": 137, "SRem": 138, "UMulExtended": 151, "SMulExtended": 152, "IsNan": 156,
    "IsInf": 157, "LogicalEqual": 164, "LogicalNotEqual": 165, "LogicalOr": 166, "LogicalAnd": 167,
    "LogicalNot": 168, "Select": 169, "IEqual": 170, "INotEqual": 171, "UGreaterThan": 172,
    "SGreaterThan": 173, "UGreaterThanEqual": 174, "SGreaterThanEqual": 175, "ULessThan": 176,
    "SLessThan": 177, "ULessThanEqual": 178, "SLessThanEqual": 179, "FOrdEqual": 180,
    "FUnordEqual": 181, "FOrdNotEqual": 182, "FUnordNotEqual": 183, "FOrdLessThan": 184,
    "FUnordLessThan": 185, "FOrdGreaterThan": 186, "FUnordGreaterThan": 187, "FOrdLessThanEqual": 188,
    "FUnordLessThanEqual": 189, "FOrdGreaterThanEqual": 190, "FUnordGreaterThanEqual": 191,
    "ShiftRightLogical": 194, "ShiftRightArithmetic": 195, "ShiftLeftLogical": 196, "BitwiseOr": 197,
    "BitwiseXor": 198, "BitwiseAnd": 199, "Not": 200, "BitFieldSExtract": 202, "BitFieldUExtract": 203,
    "BitReverse": 204, "BitCount": 205, "ControlBarrier": 224, "MemoryBarrier": 225,
    "AtomicLoad": 227, "AtomicStore": 228, "AtomicExchange": 229, "AtomicCompareExchange": 230,
    "AtomicIAdd": 234, "AtomicISub": 235, "AtomicSMin": 236, "AtomicUMin": 237, "AtomicSMax": 238,
    "AtomicUMax": 239, "AtomicAnd": 240, "AtomicOr": 241, "AtomicXor": 242, "Phi": 245,
    "LoopMerge": 246, "SelectionMerge": 247, "Label": 248, "Branch": 249, "BranchConditional": 250,
    "Return": 253, "Unreachable": 255, "GroupNonUniformAll": 334, "GroupNonUniformAny": 335,
    "GroupNonUniformBallot": 339, "GroupNonUniformShuffle": 345, "SpecConstantOp": 52,
    # SPV_KHR_cooperative_matrix
    "TypeCooperativeMatrixKHR": 4456, "CooperativeMatrixLoadKHR": 4457, "CooperativeMatrixStoreKHR": 4458,
    "CooperativeMatrixMulAddKHR": 4459, "CooperativeMatrixLengthKHR": 4460,
}

# enumerants (SPIR-V specification §3)
CAP = {"Shader": 1, "Float64": 10, "Int64": 11, "GroupNonUniform": 61, "GroupNonUniformVote": 62,
       "GroupNonUniformBallot": 64, "GroupNonUniformShuffle": 65, "DenormPreserve": 4464,
       "SignedZeroInfNanPreserve": 4466, "RoundingModeRTE": 4467, "Float16": 9,
       "CooperativeMatrixKHR": 6022, "BFloat16TypeKHR": 5116, "BFloat16CooperativeMatrixKHR": 5118,
       "VulkanMemoryModel": 5345, "VulkanMemoryModelDeviceScope": 5346}
#: the extension each capability above needs (OpExtension), where it is not core SPIR-V 1.5
CAP_EXTENSION = {"CooperativeMatrixKHR": "SPV_KHR_cooperative_matrix", "BFloat16TypeKHR": "SPV_KHR_bfloat16",
                 "BFloat16CooperativeMatrixKHR": "SPV_KHR_bfloat16"}
#: SPV_KHR_cooperative_matrix enumerants: CooperativeMatrixUse, CooperativeMatrixLayout
COOP_USE = {"MatrixAKHR": 0, "MatrixBKHR": 1, "MatrixAccumulatorKHR": 2}
COOP_LAYOUT = {"RowMajorKHR": 0, "ColumnMajorKHR": 1}
#: FPEncoding (SPV_KHR_bfloat16): the optional operand of OpTypeFloat
FP_ENCODING = {"BFloat16KHR": 0}
EXEC_MODE = {"LocalSize": 17, "DenormPreserve": 4459, "SignedZeroInfNanPreserve": 4461, "RoundingModeRTE": 4462}
STORAGE = {"Input": 1, "Uniform": 2, "Workgroup": 4, "Private": 6, "Function": 7, "PushConstant": 9,
           "StorageBuffer": 12}
DECO = {"SpecId": 1, "Block": 2, "ArrayStride": 6, "BuiltIn": 11, "Aliased": 20, "Coherent": 23,
        "Binding": 33, "DescriptorSet": 34, "Offset": 35, "NoContraction": 42}
BUILTIN = {"NumWorkgroups": 24, "WorkgroupSize": 25, "WorkgroupId": 26, "LocalInvocationId": 27,
           "LocalInvocationIndex": 29, "SubgroupSize": 36, "NumSubgroups": 38, "SubgroupId": 40,
           "SubgroupLocalInvocationId": 41}
SCOPE = {"CrossDevice": 0, "Device": 1, "Workgroup": 2, "Subgroup": 3, "Invocation": 4, "QueueFamily": 5}
SEM = {"Relaxed": 0, "Acquire": 0x2, "Release": 0x4, "AcquireRelease": 0x8, "SequentiallyConsistent": 0x10,
       "UniformMemory": 0x40, "WorkgroupMemory": 0x100, "MakeAvailable": 0x2000, "MakeVisible": 0x4000}
#: GLSL.std.450 extended instruction numbers
GLSL = {"RoundEven": 2, "Trunc": 3, "FAbs": 4, "Floor": 8, "Ceil": 9, "Sin": 13, "Cos": 14, "Tanh": 21,
        "Exp2": 29, "Log2": 30, "Sqrt": 31, "InverseSqrt": 32, "Fma": 50, "FindILsb": 73, "FindUMsb": 75}
EXECUTION_MODEL_GLCOMPUTE = 5


def string_words(s: str) -> list[int]:
    """A literal string as words: UTF-8, nul-terminated, zero-padded to a multiple of 4 bytes."""
    b = s.encode() + b"\0"
    b += b"\0" * (-len(b) % 4)
    return list(struct.unpack(f"<{len(b) // 4}I", b))


def encode(opcode: int, operands: Iterable[int | str]) -> list[int]:
    """One instruction's words (strings become literal strings)."""
    words: list[int] = []
    for o in operands:
        if isinstance(o, str):
            words += string_words(o)
        else:
            words.append(int(o) & 0xFFFFFFFF)
    return [((len(words) + 1) << 16) | opcode] + words


class Builder:
    """Collects a SPIR-V module. Ids come from :meth:`id`; ``emit`` appends to the current
    function; the section methods append to the module's other sections."""

    SECTIONS = ("capability", "extension", "import", "memory_model", "entry", "exec_mode", "debug",
                "annotation", "global", "function")

    def __init__(self) -> None:
        self.bound = 1
        self.sec: dict[str, list[int]] = {s: [] for s in self.SECTIONS}
        self._types: dict[tuple, int] = {}
        self._consts: dict[tuple, int] = {}
        self._caps: set[str] = set()
        self._exts: set[str] = set()
        self._glsl: int | None = None

    def id(self) -> int:
        n = self.bound
        self.bound += 1
        return n

    def put(self, section: str, op: str, *operands: int | str) -> None:
        self.sec[section] += encode(OP[op], operands)

    def capability(self, name: str) -> None:
        if name not in self._caps:
            self._caps.add(name)
            self.put("capability", "Capability", CAP[name])
            ext = CAP_EXTENSION.get(name)
            if ext and ext not in self._exts:
                self._exts.add(ext)
                self.put("extension", "Extension", ext)

    def glsl(self) -> int:
        if self._glsl is None:
            self._glsl = self.id()
            self.put("import", "ExtInstImport", self._glsl, "GLSL.std.450")
        return self._glsl

    def decorate(self, target: int, deco: str, *lits: int) -> None:
        self.put("annotation", "Decorate", target, DECO[deco], *lits)

    def member_decorate(self, target: int, member: int, deco: str, *lits: int) -> None:
        self.put("annotation", "MemberDecorate", target, member, DECO[deco], *lits)

    def name(self, target: int, text: str) -> None:
        self.put("debug", "Name", target, text)

    # ---- types (deduplicated)
    def _type(self, key: tuple, op: str, *operands: int) -> int:
        t = self._types.get(key)
        if t is None:
            t = self._types[key] = self.id()
            self.put("global", op, t, *operands)
        return t

    def t_void(self) -> int:
        return self._type(("void",), "TypeVoid")

    def t_bool(self) -> int:
        return self._type(("bool",), "TypeBool")

    def t_uint(self, bits: int = 32) -> int:
        if bits == 64:
            self.capability("Int64")
        return self._type(("uint", bits), "TypeInt", bits, 0)

    def t_float(self, bits: int = 32) -> int:
        if bits == 64:
            self.capability("Float64")
        if bits == 16:
            self.capability("Float16")
        return self._type(("float", bits), "TypeFloat", bits)

    def t_bfloat16(self) -> int:
        """bfloat16 (SPV_KHR_bfloat16: ``OpTypeFloat 16 BFloat16KHR``), as a cooperative-matrix
        component type."""
        self.capability("BFloat16TypeKHR")
        self.capability("BFloat16CooperativeMatrixKHR")
        return self._type(("bfloat16",), "TypeFloat", 16, FP_ENCODING["BFloat16KHR"])

    def t_coop(self, comp: int, use: str, rows: int = 16, cols: int = 16) -> int:
        """A subgroup-scope cooperative matrix (SPV_KHR_cooperative_matrix) of ``rows`` x ``cols``
        elements of type ``comp``; ``use`` a :data:`COOP_USE` name."""
        self.capability("CooperativeMatrixKHR")
        return self._type(("coop", comp, use, rows, cols), "TypeCooperativeMatrixKHR", comp,
                          self.const_u32(SCOPE["Subgroup"]), self.const_u32(rows), self.const_u32(cols),
                          self.const_u32(COOP_USE[use]))

    def t_vec(self, comp: int, n: int) -> int:
        return self._type(("vec", comp, n), "TypeVector", comp, n)

    def t_ptr(self, storage: str, t: int) -> int:
        return self._type(("ptr", storage, t), "TypePointer", STORAGE[storage], t)

    def t_fn(self, ret: int, *params: int) -> int:
        return self._type(("fn", ret, params), "TypeFunction", ret, *params)

    def t_struct(self, *members: int, key: str = "") -> int:
        """A struct type; ``key`` makes distinct (separately decorated) structs of equal members."""
        return self._type(("struct", members, key), "TypeStruct", *members)

    def t_array(self, elem: int, length: int) -> int:
        return self._type(("array", elem, length), "TypeArray", elem, self.const_u32(length))

    def t_rarray(self, elem: int, key: str = "") -> int:
        return self._type(("rarray", elem, key), "TypeRuntimeArray", elem)

    # ---- constants (deduplicated)
    def const_u32(self, v: int) -> int:
        v &= 0xFFFFFFFF
        key = ("u32", v)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "Constant", self.t_uint(), c, v)
        return c

    def const_u64(self, v: int) -> int:
        v &= 0xFFFFFFFFFFFFFFFF
        key = ("u64", v)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "Constant", self.t_uint(64), c, v & 0xFFFFFFFF, v >> 32)
        return c

    def const_f32(self, bits: int) -> int:
        key = ("f32", bits & 0xFFFFFFFF)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "Constant", self.t_float(), c, bits & 0xFFFFFFFF)
        return c

    def const_f64(self, bits: int) -> int:
        bits &= 0xFFFFFFFFFFFFFFFF
        key = ("f64", bits)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "Constant", self.t_float(64), c, bits & 0xFFFFFFFF, bits >> 32)
        return c

    def const_bool(self, v: bool) -> int:
        key = ("bool", bool(v))
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "ConstantTrue" if v else "ConstantFalse", self.t_bool(), c)
        return c

    def const_null(self, t: int) -> int:
        """``OpConstantNull`` of type t (zero of every member)."""
        key = ("null", t)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = self.id()
            self.put("global", "ConstantNull", t, c)
        return c

    def global_var(self, ptr_type: int, storage: str, init: int | None = None) -> int:
        v = self.id()
        extra = (init,) if init is not None else ()
        self.put("global", "Variable", ptr_type, v, STORAGE[storage], *extra)
        return v

    # ---- function body
    def emit(self, op: str, *operands: int | str) -> None:
        self.put("function", op, *operands)

    def value(self, op: str, rtype: int, *operands: int | str) -> int:
        """Emit an instruction with a result; returns the result id."""
        r = self.id()
        self.put("function", op, rtype, r, *operands)
        return r

    def ext(self, rtype: int, inst: str, *operands: int) -> int:
        return self.value("ExtInst", rtype, self.glsl(), GLSL[inst], *operands)

    def words(self) -> list[int]:
        out = [MAGIC, VERSION, GENERATOR, self.bound, 0]
        for s in self.SECTIONS:
            out += self.sec[s]
        return out

    def binary(self) -> bytes:
        w = self.words()
        return struct.pack(f"<{len(w)}I", *w)
