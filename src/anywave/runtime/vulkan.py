"""Vulkan runtime driver: runs WAVE modules as SPIR-V compute pipelines
(:mod:`anywave.backends.spirv`) through the PyPI ``vulkan`` binding (cffi, Vulkan 1.3 API).

Why this binding: it is the whole Vulkan C API, so the two things WAVE needs are a struct away --
``VkPipelineShaderStageRequiredSubgroupSizeCreateInfo`` (pick W where the device offers a range)
with ``REQUIRE_FULL_SUBGROUPS``, and plain storage buffers bound by descriptor. ``wgpu`` takes
SPIR-V only through naga's translation and exposes no subgroup-size control; Kompute (``kp``) has
no subgroup-size control either.

Devices: the first physical device (Mesa's lavapipe on a machine without a GPU; NVIDIA's driver
on a GPU machine), or the one whose name contains ``ANYWAVE_VULKAN_DEVICE``. Its subgroup sizes
(``minSubgroupSize..maxSubgroupSize`` with ``subgroupSizeControl`` and the compute stage in
``requiredSubgroupSizeStages``), limits and float controls are probed once; the capabilities it
lacks (``shaderFloat64``, ``shaderInt64``, subgroups) make kernels refused with the reason
(:func:`anywave.backends.spirv.check_supported`). Float controls it lacks (lavapipe has no
``shaderDenormPreserveFloat32``) are reported in the target's details.

Memory (issue 27): ``aw.array/empty/zeros(..., target="vulkan")`` are storage buffers in
device-local memory (:class:`VulkanMemory`); their bytes move only through one reusable
host-visible staging buffer, at ``assign``/``.numpy()``. NumPy arguments of a launch are staged
the same way (copied in, the dispatch, the written ones copied out, in one command buffer) and
make the launch synchronous. :attr:`VulkanDevice.transfers` counts every staged transfer.

Launch: each launch is one command buffer (a global memory barrier, then the dispatch), submitted
with its own fence; a launch on device arrays only is not waited for, so a chain of launches
never touches the host. In-order effects follow from the barrier at the start of every command
buffer (its first synchronisation scope covers everything submitted earlier to the queue). The
fences are waited for, oldest first, at ``.numpy()``, ``aw.synchronize()``, a staged launch or
when :data:`MAX_IN_FLIGHT` are pending, each at most :data:`FENCE_TIMEOUT_NS`: a dispatch that
does not finish (or a lost device) is a :class:`VulkanError` naming the kernel, after which the
device refuses work (its buffers are kept, never freed under a running dispatch).

Robustness (issue 31): the device is created with ``robustBufferAccess``, so a kernel without its
bounds check reads zeros or writes inside its own buffer, never another allocation (that it is an
error is ``check=True``'s job). Fence waits are cut into :data:`WAIT_SLICE_NS` slices, so Ctrl-C
raises KeyboardInterrupt during ``aw.synchronize()``/``.numpy()`` (the work stays pending and owned
by its submission). A freed array is refused, a second free does nothing, and a child made by
``fork()`` after the device was created gets a :class:`VulkanError` saying to use ``spawn``
(the driver's threads do not survive a fork; its finalizers and exit hooks leave the device alone).

Scalars and the workgroup size are push constants; the workgroup is one dimension of x*y*z
threads (padded to a multiple of W for kernels with wave operations). Pipelines and descriptor
set layouts are cached per (SPIR-V module hash, launched workgroup size), modules per (module
object, W), descriptor sets of device-array launches per (set layout, buffers) until one of the
buffers is destroyed; pipelines are built through a ``VkPipelineCache`` kept on disk in anywave's cache dir
(:meth:`VulkanDevice.save_pipeline_cache`, also at exit). Kernel times: :func:`profile` records
each dispatch's device time from timestamp queries.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from anywave.backends.spirv import WAVE_WIDTHS, SpirvKernel, SpirvProgram, VulkanFeatures
from anywave.errors import LaunchConfigError, WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime import interrupt
from anywave.runtime.driver import Driver
from anywave.runtime.targets import SETTING_OFF, SETTING_ON, ProcessDevice, RunnerTarget, optimize_target_code


def _fence_timeout_ns(text: str | None) -> int:
    """:data:`FENCE_TIMEOUT_NS` from ``ANYWAVE_VULKAN_TIMEOUT`` (seconds, a positive number),
    60 s where it is unset.

    Raises:
        ValueError: the variable is set to anything else (named, with the value)."""
    if text is None or not text.strip():
        return 60 * 10**9
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < 1e9:
        raise ValueError(f"ANYWAVE_VULKAN_TIMEOUT must be a positive number of seconds, not {text!r}")
    return int(seconds * 1e9)


#: how long a dispatch may take before the device is declared wedged (nanoseconds); None: 60 s,
#: or ``ANYWAVE_VULKAN_TIMEOUT`` seconds, read when the device is created (the test suite sets a
#: hang guard of 600 s, so that no test's outcome depends on how loaded the machine is; a bad
#: value makes the Vulkan target unavailable, saying why, and leaves every other target alone)
FENCE_TIMEOUT_NS: int | None = None
#: submissions in flight before a launch waits for the oldest
MAX_IN_FLIGHT = 64
#: descriptor sets of device-array launches kept for reuse (beyond: one per launch)
SET_CACHE = 256
#: longest single wait inside the driver (a Ctrl-C is seen between waits)
WAIT_SLICE_NS = 50_000_000

class VulkanError(WaveError):
    """Vulkan is unavailable (no binding, loader, ICD or device), a pipeline failed to build, or
    a launch was refused or failed; the message says which and why."""


#: VK_COMPONENT_TYPE_BFLOAT16_KHR (VK_KHR_shader_bfloat16), which the ``vulkan`` binding (1.3.275)
#: predates
BFLOAT16_COMPONENT = 1000141000
#: VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR
_BFLOAT16_FEATURES_STYPE = 1000141000


def _bfloat16_features(vk: Any, pnext: Any, cooperative_matrix: bool = False) -> Any:
    """A ``VkPhysicalDeviceShaderBfloat16FeaturesKHR`` (sType, pNext, then the VkBool32s
    shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix), which the
    ``vulkan`` binding predates: built as a struct of the same layout (sType, pNext, three
    VkBool32: ``VkPhysicalDeviceMultiviewFeatures``) with the bfloat16 sType."""
    s = vk.VkPhysicalDeviceMultiviewFeatures(pNext=pnext, multiview=cooperative_matrix,
                                              multiviewTessellationShader=cooperative_matrix)
    s.sType = _BFLOAT16_FEATURES_STYPE
    return s


def _bfloat16_enabled(s: Any) -> bool:
    """shaderBFloat16Type and shaderBFloat16CooperativeMatrix of a struct from :func:`_bfloat16_features`."""
    return bool(s.multiview) and bool(s.multiviewTessellationShader)


def _import_vk() -> Any:
    try:
        import vulkan as vk
    except ImportError as e:
        raise VulkanError("the Python Vulkan binding is not installed (pip install 'anywave[vulkan]')") from e
    except OSError as e:  # the binding dlopens libvulkan at import
        raise VulkanError(f"the Vulkan loader (libvulkan.so.1) cannot be loaded: {e}; install libvulkan1 "
                          "and a driver (Debian: mesa-vulkan-drivers for lavapipe)") from e
    return vk


_OPS_NEEDED = ("BASIC", "VOTE", "BALLOT", "SHUFFLE")


class VulkanDevice:
    """One Vulkan device with a compute queue, its probed :class:`VulkanFeatures` and limits,
    and the caches of shader modules and pipelines."""

    def __init__(self) -> None:
        try:
            #: the fence timeout of this device (nanoseconds; FENCE_TIMEOUT_NS, when set, wins)
            self.fence_timeout_ns = _fence_timeout_ns(os.environ.get("ANYWAVE_VULKAN_TIMEOUT"))
        except ValueError as e:
            raise VulkanError(str(e)) from None
        try:
            lean = not optimize_target_code()
        except LaunchConfigError:  # a bad value fails the first build (VulkanRunner.translate), not
            lean = False  # the device, which stays usable once the value is mended
        lean = lean and "GALLIVM_PERF" not in os.environ
        if lean:  # lavapipe's LLVM without its optimisation passes: Mesa reads the variable when
            os.environ["GALLIVM_PERF"] = "nopt"  # it starts (any other driver ignores it)
        try:
            self._start()
        finally:
            if lean:  # not handed on to child processes or later programs
                os.environ.pop("GALLIVM_PERF", None)

    def _start(self) -> None:
        vk = self.vk = _import_vk()
        app = vk.VkApplicationInfo(pApplicationName="anywave", applicationVersion=1, pEngineName="anywave",
                                   engineVersion=1, apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
        try:
            self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
        except Exception as e:  # noqa: BLE001 - no ICD, incompatible driver
            raise VulkanError(f"vkCreateInstance failed ({type(e).__name__}: {e}): no Vulkan driver (ICD) "
                              "found; install one (Debian: mesa-vulkan-drivers for lavapipe)") from e
        pds = list(vk.vkEnumeratePhysicalDevices(self.instance))
        if not pds:
            raise VulkanError("the Vulkan loader found no physical device")
        names = [vk.vkGetPhysicalDeviceProperties(p).deviceName for p in pds]
        want = os.environ.get("ANYWAVE_VULKAN_DEVICE", "").lower()
        idx = 0
        if want:
            hits = [i for i, n in enumerate(names) if want in n.lower()]
            if not hits:
                raise VulkanError(f"ANYWAVE_VULKAN_DEVICE={want!r} matches none of {names}")
            idx = hits[0]
        pd = self.pd = pds[idx]
        props = self._props = vk.vkGetPhysicalDeviceProperties(pd)
        self.name = props.deviceName
        api = props.apiVersion
        self.api_version = f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}"
        if (api >> 22, (api >> 12) & 0x3FF) < (1, 2):
            raise VulkanError(f"{self.name} offers Vulkan {self.api_version}; anywave's SPIR-V 1.5 needs 1.2+")
        self.driver_version = props.driverVersion
        lim = props.limits
        self.max_workgroup = int(min(lim.maxComputeWorkGroupInvocations, lim.maxComputeWorkGroupSize[0]))
        self.local_memory = int(lim.maxComputeSharedMemorySize)
        self.max_grid = tuple(int(lim.maxComputeWorkGroupCount[i]) for i in range(3))
        self.max_push = int(lim.maxPushConstantsSize)
        self.max_buffer = int(lim.maxStorageBufferRange)
        # properties: subgroups, subgroup size control, float controls
        sc = vk.VkPhysicalDeviceSubgroupSizeControlProperties()
        sg = vk.VkPhysicalDeviceSubgroupProperties(pNext=sc)
        fc = vk.VkPhysicalDeviceFloatControlsProperties(pNext=sg)
        drv = vk.VkPhysicalDeviceDriverProperties(pNext=fc)
        vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(pNext=drv))
        self.driver = f"{vk.ffi.string(drv.driverName).decode()} {vk.ffi.string(drv.driverInfo).decode()}".strip()
        self.extensions = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
        f13 = vk.VkPhysicalDeviceVulkan13Features()
        f12 = vk.VkPhysicalDeviceVulkan12Features(pNext=f13)
        coop_f = bf16_f = None
        chain: Any = f12
        if "VK_KHR_cooperative_matrix" in self.extensions:
            coop_f = chain = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=chain)
            if "VK_KHR_shader_bfloat16" in self.extensions:
                bf16_f = chain = _bfloat16_features(vk, chain)
        f2 = vk.VkPhysicalDeviceFeatures2(pNext=chain)
        vk.vkGetPhysicalDeviceFeatures2(pd, f2)
        self.fp64 = bool(f2.features.shaderFloat64)
        int64 = bool(f2.features.shaderInt64)
        ops_ok = all(sg.supportedOperations & getattr(vk, f"VK_SUBGROUP_FEATURE_{o}_BIT") for o in _OPS_NEEDED)
        compute = vk.VK_SHADER_STAGE_COMPUTE_BIT
        self.subgroup_size = int(sg.subgroupSize)
        widths: tuple[int, ...] = ()
        self.subgroup_note = ""
        if not (sg.supportedStages & compute and ops_ok):
            self.subgroup_note = "no compute subgroup basic/vote/ballot/shuffle operations"
        elif not (f13.subgroupSizeControl and f13.computeFullSubgroups and sc.requiredSubgroupSizeStages & compute):
            self.subgroup_note = "no subgroup size control for compute (VK_EXT_subgroup_size_control)"
        else:
            widths = tuple(w for w in WAVE_WIDTHS if sc.minSubgroupSize <= w <= sc.maxSubgroupSize)
        self.subgroup_range = (int(sc.minSubgroupSize), int(sc.maxSubgroupSize))

        def widths_of(prefix: str) -> tuple[int, ...]:
            return tuple(w for w in (32, 64) if getattr(fc, f"{prefix}Float{w}"))

        self.float_controls = {
            "signed_zero_inf_nan": widths_of("shaderSignedZeroInfNanPreserve"),
            "rte": widths_of("shaderRoundingModeRTE"),
            "denorm_preserve": widths_of("shaderDenormPreserve"),
        }
        # lavapipe (llvmpipe) ends an invocation's loops after 65535 turns in all (spirv_status)
        # and its workgroup memory is unbounded host memory (spirv_status.guards)
        lavapipe = int(drv.driverID) == vk.VK_DRIVER_ID_MESA_LLVMPIPE
        #: the shapes and types of VK_KHR_cooperative_matrix (empty where it is not offered)
        self.cooperative_matrix = self._cooperative_matrix_properties()
        coop_types, self.coop_setting_error = self._coop_types(coop_f, bf16_f, f12, widths)
        self.features = VulkanFeatures(fp64=self.fp64, int64=int64, wave_widths=widths,
                                       loop_limit=65535 if lavapipe else 0, guard_local=lavapipe,
                                       cooperative_matrix=coop_types,
                                       coop_wave_width=self.subgroup_size if coop_types else 0, **self.float_controls)
        # device with one compute queue and the features the lowering uses
        fams = vk.vkGetPhysicalDeviceQueueFamilyProperties(pd)
        qf = next((i for i, f in enumerate(fams) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
        if qf is None:
            raise VulkanError(f"{self.name} has no compute queue")
        self.qf = qf
        en13 = vk.VkPhysicalDeviceVulkan13Features(subgroupSizeControl=bool(widths), computeFullSubgroups=bool(widths))
        # robustBufferAccess (a feature every Vulkan device offers): an access outside a buffer's
        # descriptor range reads 0 or stays inside the buffer, never another allocation -- without
        # it a kernel that forgets its bounds check writes into whatever memory follows (on
        # lavapipe: the Python heap). Bounds errors as errors are check=True's job.
        self.robust = bool(f2.features.robustBufferAccess)
        exts: list[str] = []
        chain = en13
        keep = []  # every struct of the chain stays alive until vkCreateDevice returns
        if coop_types:  # cooperative matrices, their component types and the Vulkan memory model
            chain = vk.VkPhysicalDeviceVulkan12Features(
                pNext=chain, shaderFloat16="f16" in coop_types, vulkanMemoryModel=True,
                vulkanMemoryModelDeviceScope=True)
            keep.append(chain)
            chain = vk.VkPhysicalDeviceCooperativeMatrixFeaturesKHR(pNext=chain, cooperativeMatrix=True)
            keep.append(chain)
            exts.append("VK_KHR_cooperative_matrix")
            if "bf16" in coop_types:
                chain = _bfloat16_features(vk, chain, cooperative_matrix=True)
                exts.append("VK_KHR_shader_bfloat16")
        en = vk.VkPhysicalDeviceFeatures2(pNext=chain, features=vk.VkPhysicalDeviceFeatures(
            shaderFloat64=self.fp64, shaderInt64=int64, robustBufferAccess=self.robust))
        qinfo = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=qf, queueCount=1, pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(pd, vk.VkDeviceCreateInfo(
            pNext=en, queueCreateInfoCount=1, pQueueCreateInfos=[qinfo], enabledExtensionCount=len(exts),
            ppEnabledExtensionNames=exts or None), None)
        del keep
        self.queue = vk.vkGetDeviceQueue(self.device, qf, 0)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            queueFamilyIndex=qf, flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self._mp = vk.vkGetPhysicalDeviceMemoryProperties(pd)
        #: timestamp queries: bits the queue writes, nanoseconds per tick (limits.timestampPeriod)
        self.timestamp_bits = int(fams[qf].timestampValidBits)
        self.timestamp_period = float(lim.timestampPeriod)
        self.timestamps = self.timestamp_bits > 0
        self._pipelines: dict[tuple[str, int], Any] = {}
        self.lock = threading.Lock()
        #: the process that created the device: a child made by fork() inherits the handles but not
        #: the driver's threads, so every entry point refuses work there (see _check_process)
        self.pid = os.getpid()
        #: why the device is unusable (a dispatch that timed out may still run), or "" if it is not
        self.wedged = ""
        #: the process is exiting: no new work (anywave.runtime.interrupt's exit hook, close_for_exit)
        self.closing = False
        self._pending: deque[_Slot] = deque()
        self._free_slots: list[_Slot] = []
        self._deferred: list[VulkanBuffer] = []
        self._staging: VulkanBuffer | None = None
        #: staged transfers between host and device memory since the device was created
        self.transfers = {"to_device": 0, "to_device_bytes": 0, "to_host": 0, "to_host_bytes": 0}
        #: command buffers submitted since the device was created
        self.submissions = 0
        #: (label, seconds) per timed dispatch while :func:`profile` is active, else None
        self.profile: list[tuple[str, float]] | None = None
        self._pc_new = 0
        # structs every submission uses, built once (cffi struct building is most of a launch's host time)
        self._begin_info = vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        self._bar = ([vk.VkMemoryBarrier(
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
            | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)], stages)
        # descriptor sets of launches on device arrays, cached per (set layout, buffers): freed when
        # one of their buffers is destroyed (by then no submission in flight uses them)
        self._set_pool = vk.vkCreateDescriptorPool(self.device, vk.VkDescriptorPoolCreateInfo(
            flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT, maxSets=SET_CACHE, poolSizeCount=1,
            pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                descriptorCount=8 * SET_CACHE)]), None)
        self._sets: dict[tuple[int, tuple[tuple[int, int], ...]], Any] = {}
        self._sets_of: dict[int, list[tuple[int, tuple[tuple[int, int], ...]]]] = {}
        self._load_pipeline_cache()
        atexit.register(self.save_pipeline_cache)
        # a program that ends (or is interrupted) with dispatches still running must not exit under
        # them: the driver's exit-time destructors would race its threads (anywave.runtime.interrupt)
        interrupt.watch(f"Vulkan ({self.name})", self._busy, self.close_for_exit)

    def _timeout_ns(self) -> int:
        return int(FENCE_TIMEOUT_NS) if FENCE_TIMEOUT_NS is not None else self.fence_timeout_ns

    def _busy(self) -> bool:
        """Whether a submitted command buffer has not finished: the exit hook's test. Never
        blocks: while another thread holds the device (submitting, retiring: the fences may be
        reset under it) the device counts as busy; a wedged device counts as idle (its dispatch is
        recorded as overdue: anywave.runtime.interrupt waits for it, bounded)."""
        if self.wedged:
            return False
        if not self.lock.acquire(blocking=False):
            return True
        try:
            return any(self._running(slot) for slot in self._pending)
        finally:
            self.lock.release()

    def close_for_exit(self) -> None:
        """The process is exiting (anywave.runtime.interrupt's exit hook): refuse new work from
        threads still running (a daemon thread launching in a loop would keep the queue busy for
        ever), so the queue drains and nothing enters the driver while its exit-time destructors
        run; buffers freed from now on are left to the process's end."""
        self.closing = True

    def _running(self, slot: _Slot) -> bool:
        """Whether ``slot``'s fence has not signalled yet (never blocks; a lost device raises)."""
        return self.vk.lib.vkGetFenceStatus(self.device, slot.fence) == self.vk.VK_NOT_READY

    def _cooperative_matrix_properties(self) -> list[dict[str, Any]]:
        """What ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` reports: one dict per
        (M, N, K, A, B, C, result type, saturating, scope); [] without the extension."""
        vk = self.vk
        if "VK_KHR_cooperative_matrix" not in self.extensions:
            return []
        try:
            fn = vk.vkGetInstanceProcAddr(self.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
            props = fn(self.pd)
        except Exception:  # noqa: BLE001 - a loader without the entry point
            return []
        names = {getattr(vk, n): n.removeprefix("VK_COMPONENT_TYPE_").removesuffix("_KHR").lower()
                 for n in dir(vk) if n.startswith("VK_COMPONENT_TYPE_") and n.endswith("_KHR")}
        scopes = {getattr(vk, n): n.removeprefix("VK_SCOPE_").removesuffix("_KHR").lower()
                  for n in dir(vk) if n.startswith("VK_SCOPE_") and n.endswith("_KHR")}
        return [{"M": int(p.MSize), "N": int(p.NSize), "K": int(p.KSize), "A": names.get(p.AType, p.AType),
                 "B": names.get(p.BType, p.BType), "C": names.get(p.CType, p.CType),
                 "result": names.get(p.ResultType, p.ResultType), "saturating": bool(p.saturatingAccumulation),
                 "scope": scopes.get(p.scope, p.scope)} for p in props]

    def _coop_types(self, coop_f: Any, bf16_f: Any, f12: Any, widths: tuple[int, ...]) -> tuple[tuple[str, ...], str]:
        """The fragment element types the lowering may put in cooperative matrices
        (:attr:`VulkanFeatures.cooperative_matrix`), and why ``ANYWAVE_VULKAN_COOPMAT`` is not
        understood ("" when it is). With ``ANYWAVE_VULKAN_COOPMAT=1``: 16 x 16 x 16 subgroup
        matrices with f32 accumulator and result among the reported properties, the
        ``cooperativeMatrix`` feature (and
        ``shaderBFloat16CooperativeMatrix`` / ``shaderFloat16`` for the component type), the Vulkan
        memory model with device scope, and subgroups of the device's size for compute."""
        raw = os.environ.get("ANYWAVE_VULKAN_COOPMAT", "")
        low = raw.strip().lower()
        if low and low not in SETTING_ON + SETTING_OFF:
            return (), (f"ANYWAVE_VULKAN_COOPMAT={raw!r} is not understood: use 1 (cooperative matrices "
                        "where the device offers them) or 0 (the per-lane fragment lowering, the default)")
        # off unless asked for: the lowering has not yet run on a device that offers cooperative
        # matrices (docs/internals.md, "Cooperative matrices"); its first device run decides the default
        if low not in SETTING_ON or coop_f is None or not coop_f.cooperativeMatrix:
            return (), ""
        if not (f12.vulkanMemoryModel and f12.vulkanMemoryModelDeviceScope) or self.subgroup_size not in widths:
            return (), ""
        names = {"float16": "f16", "bfloat16": "bf16", BFLOAT16_COMPONENT: "bf16"}
        out = set()
        for p in self.cooperative_matrix:
            t = names.get(p["A"])
            if (t and (p["M"], p["N"], p["K"]) == (16, 16, 16) and p["B"] == p["A"] and p["C"] == "float32"
                    and p["result"] == "float32" and p["scope"] == "subgroup" and not p["saturating"]):
                if (t == "f16" and f12.shaderFloat16) or (t == "bf16" and bf16_f is not None
                                                         and _bfloat16_enabled(bf16_f)):
                    out.add(t)
        return tuple(sorted(out)), ""

    def capabilities(self) -> Capability:
        caps = Capability.F16 | Capability.BF16 | Capability.OFFSET64 | Capability.ATOMIC_F32
        if self.fp64:
            caps |= Capability.F64
        if self.features.int64:
            caps |= Capability.INT64
        if self.features.wave_widths:
            caps |= Capability.WAVE_OPS | Capability.MMA | Capability.MMA_ACC
        return caps

    def details(self) -> dict[str, Any]:
        fc = self.float_controls
        return {"api_version": self.api_version, "driver": self.driver, "driver_version": self.driver_version,
                "memory": "device-local buffers, staged transfers", "pipeline_cache_bytes": self.pipeline_cache_loaded,
                "cooperative_matrix": self.cooperative_matrix,
                "cooperative_matrix_lowering": list(self.features.cooperative_matrix),
                "timestamp_period_ns": self.timestamp_period,
                "subgroup_size": self.subgroup_size, "subgroup_size_range": self.subgroup_range,
                "float_controls": {k: list(v) for k, v in fc.items()},
                "missing_float_controls": [f"{k}{w}" for k, v in fc.items() for w in (32, 64) if w not in v]}

    # ---- memory
    def _pick_type(self, req_bits: int, want: int, prefer: int = 0) -> int | None:
        ok = [i for i in range(self._mp.memoryTypeCount)
              if req_bits >> i & 1 and (self._mp.memoryTypes[i].propertyFlags & want) == want]
        best = [i for i in ok if (self._mp.memoryTypes[i].propertyFlags & prefer) == prefer]
        return (best or ok or [None])[0]

    def _buffer(self, nbytes: int, usage: int, want: int, prefer: int, what: str) -> VulkanBuffer:
        vk = self.vk
        size = max(16, -(-int(nbytes) // 16) * 16)
        if size > self.max_buffer and usage & vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT:
            raise VulkanError(f"buffer of {nbytes} bytes exceeds {self.name}'s maxStorageBufferRange {self.max_buffer}")
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        ti = self._pick_type(req.memoryTypeBits, want, prefer)
        if ti is None:
            vk.vkDestroyBuffer(self.device, buf, None)
            raise VulkanError(f"{self.name}: no memory type fits a {what} buffer")
        try:
            mem = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                           memoryTypeIndex=ti), None)
        except Exception as e:  # noqa: BLE001 - out of device memory
            vk.vkDestroyBuffer(self.device, buf, None)
            raise VulkanError(f"allocating {size} bytes of {what} memory on {self.name} failed: "
                              f"{type(e).__name__}: {e}") from e
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        return VulkanBuffer(buf, mem, size, int(vk.ffi.cast("uintptr_t", buf)))

    def alloc(self, nbytes: int) -> VulkanBuffer:
        """A storage buffer of at least ``nbytes`` (rounded up to 16) in device-local memory
        (the first memory type with ``DEVICE_LOCAL``; lavapipe's one type is also host-visible),
        usable as a copy source and destination.

        Raises:
            VulkanError: above ``maxStorageBufferRange`` or out of device memory."""
        vk = self.vk
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        return self._buffer(nbytes, usage, 0, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "device-local")

    def free(self, b: VulkanBuffer) -> None:
        """Destroy ``b`` once no submitted work uses it (at once when the queue is idle). Safe
        from a finalizer: when the lock is held (even by this thread) it is only queued. A second
        free of the same buffer does nothing; in a forked child nothing is freed (the parent owns it)."""
        if b.freed or os.getpid() != self.pid or self.closing:
            b.freed = True
            return
        b.freed = True
        if not self.lock.acquire(blocking=False):
            self._deferred.append(b)
            return
        try:
            self._free_locked(b)
        finally:
            self.lock.release()

    def _free_locked(self, b: VulkanBuffer) -> None:
        if self.wedged:  # a dispatch may still be writing it: keep it (see _retire_one)
            return
        if self._pending:
            self._pending[-1].keep.append(b)  # destroyed when that submission retires
        else:
            self._destroy(b)

    def _free_deferred(self) -> None:
        while self._deferred:
            self._free_locked(self._deferred.pop())

    def _destroy(self, b: VulkanBuffer) -> None:
        if b.destroyed:
            return
        b.destroyed = b.freed = True
        for key in self._sets_of.pop(b.key, ()):  # cached descriptor sets naming it (none in flight)
            ent = self._sets.pop(key, None)
            if ent is not None:
                self.vk.vkFreeDescriptorSets(self.device, self._set_pool, 1, [ent])
        if b.mapped is not None:
            self.vk.vkUnmapMemory(self.device, b.mem)
            b.mapped = None
        self.vk.vkDestroyBuffer(self.device, b.buf, None)
        self.vk.vkFreeMemory(self.device, b.mem, None)

    def staging(self, nbytes: int) -> VulkanBuffer:
        """The reusable host-visible staging buffer, at least ``nbytes`` long (grown to the next
        power of two; the old one is freed). Only used by synchronous transfers, so it is never
        in flight when a caller writes it (callers hold :attr:`lock`): a transfer whose wait was
        interrupted (Ctrl-C) is waited for here before the buffer is rewritten or replaced.

        Raises:
            VulkanError: the device is wedged or an interrupted transfer did not finish in time."""
        self._check_alive("a staged transfer")
        while any(s.staging for s in self._pending):
            self._retire_one(block=True)
        st = self._staging
        if st is None or st.size < nbytes:
            if st is not None:
                self._destroy(st)
                self._staging = None
            vk = self.vk
            size = 1 << max(16, (int(nbytes) - 1).bit_length())
            want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
            st = self._buffer(size, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                              want, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "host-visible staging")
            ptr = vk.vkMapMemory(self.device, st.mem, 0, st.size, 0)
            st.mapped = np.frombuffer(ptr, dtype=np.uint8, count=st.size)
            self._staging = st
        return st

    def status_buffer(self, words: np.ndarray) -> VulkanBuffer:
        """A host-visible storage buffer holding ``words`` (uint32), mapped (``.mapped``), for a
        launch's status record (backends.spirv_status): written before the dispatch, read when it
        retires. Callers hold :attr:`lock`.

        Raises:
            VulkanError: no host-visible memory type fits."""
        vk = self.vk
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        b = self._buffer(words.nbytes, vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, want, 0, "status record")
        ptr = vk.vkMapMemory(self.device, b.mem, 0, b.size, 0)
        b.mapped = np.frombuffer(ptr, dtype=np.uint8, count=b.size)
        b.mapped[:] = 0
        b.mapped[:words.nbytes] = words.view(np.uint8)
        return b

    def upload(self, dst: VulkanBuffer, host: np.ndarray) -> None:
        """Copy the bytes of the C-contiguous ``host`` to the start of ``dst`` through the staging
        buffer, after the work submitted before (waits for the copy).

        Raises:
            ArgumentError: ``host`` holds Python objects; VulkanError: ``dst`` was freed, a forked
                child, a wedged device."""
        self._check_usable(dst, host)
        raw = host.reshape(-1).view(np.uint8)
        n = raw.size
        if not n:
            return
        pad = min(-(-n // 16) * 16, dst.size)  # the padding inside the descriptor's range gets zeros
        with self.lock:
            st = self.staging(pad)
            st.mapped[:n] = raw
            st.mapped[n:pad] = 0
            self.transfers["to_device"] += 1
            self.transfers["to_device_bytes"] += n

            def rec(cmd: Any, slot: _Slot) -> None:
                self._barrier(cmd)
                self.vk.vkCmdCopyBuffer(cmd, st.buf, dst.buf, 1, [self.vk.VkBufferCopy(0, 0, pad)])

            self._submit(rec, "an upload to the device", wait=True, staging=True)

    def download(self, src: VulkanBuffer, host: np.ndarray) -> None:
        """Copy the first ``host.nbytes`` bytes of ``src`` into ``host`` (C-contiguous) through the
        staging buffer, after the work submitted before (waits for it).

        Raises:
            as :meth:`upload`."""
        self._check_usable(src, host)
        raw = host.reshape(-1).view(np.uint8)
        n = raw.size
        if not n:
            return
        with self.lock:
            st = self.staging(n)
            self.transfers["to_host"] += 1
            self.transfers["to_host_bytes"] += n

            def rec(cmd: Any, slot: _Slot) -> None:
                self._barrier(cmd)
                self.vk.vkCmdCopyBuffer(cmd, src.buf, st.buf, 1, [self.vk.VkBufferCopy(0, 0, n)])
                self._host_barrier(cmd)

            self._submit(rec, "a download to the host", wait=True, staging=True)
            raw[...] = st.mapped[:n]

    def fill_zero(self, dst: VulkanBuffer) -> None:
        """Zero all of ``dst`` on the device (``vkCmdFillBuffer``; no host bytes), asynchronously."""
        self._check_usable(dst)
        with self.lock:
            def rec(cmd: Any, slot: _Slot) -> None:
                self._barrier(cmd)
                self.vk.vkCmdFillBuffer(cmd, dst.buf, 0, dst.size, 0)

            self._submit(rec, "a fill of zeros", wait=False)

    def _check_process(self) -> None:
        """Raises VulkanError in a child made by fork() after this device was created: the child
        has the parent's handles but none of the driver's threads, so a submission there never
        completes (and the driver's locks may be held by a thread that does not exist)."""
        if os.getpid() != self.pid:
            raise VulkanError(f"the Vulkan device {self.name} was created in process {self.pid}; this process "
                              f"({os.getpid()}) is a child made by fork() and cannot use it or its arrays. Start "
                              "workers with multiprocessing's 'spawn' (or 'forkserver') start method, or use "
                              "Vulkan only in the child")

    def _check_usable(self, b: VulkanBuffer, host: np.ndarray | None = None) -> None:
        self._check_process()
        if b.freed:
            raise VulkanError("this vulkan array's memory was freed; it cannot be read, written or launched on")
        if host is not None and host.dtype.hasobject:
            from anywave.runtime.arrays import ArgumentError

            raise ArgumentError(f"dtype {host.dtype} holds Python objects; their bytes are pointers, not values a "
                                "vulkan array can hold (use a numeric dtype)")

    # ---- pipelines
    def _load_pipeline_cache(self) -> None:
        vk = self.vk
        data = b""
        self._pc_path = None
        try:
            from anywave.cache import safe_subdir, verified_read

            uuid = bytes(vk.ffi.buffer(self._props.pipelineCacheUUID, vk.VK_UUID_SIZE)).hex()
            name = f"{self._props.vendorID:04x}-{self._props.deviceID:04x}-{self.driver_version:x}-{uuid}.bin"
            self._pc_path = safe_subdir("vulkan-pipelines") / name
            data = verified_read(self._pc_path) or b""
        except (OSError, WaveError):  # no usable cache dir: an in-memory cache only
            self._pc_path = None
        try:
            if data:
                buf = vk.ffi.new("char[]", data)
                info = vk.VkPipelineCacheCreateInfo(initialDataSize=len(data), pInitialData=buf)
            else:
                info = vk.VkPipelineCacheCreateInfo()
            self.pipeline_cache = vk.vkCreatePipelineCache(self.device, info, None)
            self.pipeline_cache_loaded = len(data)
        except Exception:  # noqa: BLE001 - a stale or damaged file: start empty
            self.pipeline_cache = vk.vkCreatePipelineCache(self.device, vk.VkPipelineCacheCreateInfo(), None)
            self.pipeline_cache_loaded = 0

    def save_pipeline_cache(self) -> int:
        """Write the ``VkPipelineCache`` to ``<anywave cache>/vulkan-pipelines/<vendor>-<device>-
        <driver>-<pipelineCacheUUID>.bin`` (atomically, with its hash); returns the bytes written
        (0 when nothing was built since the load or there is no usable cache dir). Runs at exit."""
        if self._pc_path is None or not self._pc_new or self.wedged or os.getpid() != self.pid:
            return 0
        vk = self.vk
        from anywave.cache import atomic_write

        with self.lock:
            n = vk.ffi.new("size_t*")
            if vk.lib.vkGetPipelineCacheData(self.device, self.pipeline_cache, n, vk.ffi.NULL) != vk.VK_SUCCESS:
                return 0
            buf = vk.ffi.new("char[]", n[0])
            if vk.lib.vkGetPipelineCacheData(self.device, self.pipeline_cache, n, buf) != vk.VK_SUCCESS:
                return 0
            data = bytes(vk.ffi.buffer(buf, n[0]))
            self._pc_new = 0
        try:
            atomic_write(self._pc_path, data, record_hash=True)
        except OSError:
            return 0
        return len(data)

    def pipeline(self, k: SpirvKernel, P: int, W: int) -> Any:
        """(pipeline, layout, set layout, shader module) for kernel ``k`` launched with P threads
        per workgroup, cached by (module hash, P), built through the on-disk ``VkPipelineCache``."""
        key = (k.sha256, P)
        hit = self._pipelines.get(key)
        if hit is not None:
            return hit
        vk, dev = self.vk, self.device
        binds = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                 descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                 for i in range(len(k.buffers) + int(k.status))]  # + the status record
        dsl = vk.vkCreateDescriptorSetLayout(dev, vk.VkDescriptorSetLayoutCreateInfo(
            bindingCount=len(binds), pBindings=binds or None), None)
        pcr = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=4 * k.push_words)
        layout = vk.vkCreatePipelineLayout(dev, vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=1, pSetLayouts=[dsl], pushConstantRangeCount=1, pPushConstantRanges=[pcr]), None)
        code = k.binary
        sm = vk.vkCreateShaderModule(dev, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
        spec_data = vk.ffi.new("uint32_t[1]", [P])
        spec = vk.VkSpecializationInfo(mapEntryCount=1, pMapEntries=[vk.VkSpecializationMapEntry(
            constantID=0, offset=0, size=4)], dataSize=4, pData=spec_data)
        flags, pnext = 0, None
        if k.wave_mode:
            flags = vk.VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT  # = the core 1.3 bit
            pnext = vk.VkPipelineShaderStageRequiredSubgroupSizeCreateInfo(requiredSubgroupSize=W)
        stage = vk.VkPipelineShaderStageCreateInfo(pNext=pnext, flags=flags, stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                                   module=sm, pName="main", pSpecializationInfo=spec)
        try:
            pipes = vk.vkCreateComputePipelines(dev, self.pipeline_cache, 1, [vk.VkComputePipelineCreateInfo(
                stage=stage, layout=layout)], None)
        except Exception as e:  # noqa: BLE001 - carry the driver's answer
            raise VulkanError(f"vkCreateComputePipelines failed on {self.name} for kernel {k.name!r}: "
                              f"{type(e).__name__}: {e}") from e
        self._pc_new += 1
        hit = self._pipelines[key] = (pipes[0], layout, dsl, sm)
        return hit

    # ---- submission
    def _barrier(self, cmd: Any) -> None:
        """A global memory barrier: the shader and transfer writes of everything submitted before
        (earlier command buffers of this queue included) are visible to the commands after it,
        and their reads are done before it (write-after-read)."""
        bar, stages = self._bar
        self.vk.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, bar, 0, None, 0, None)

    def _host_barrier(self, cmd: Any) -> None:
        vk = self.vk
        b = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                               dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                                vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [b], 0, None, 0, None)

    def _slot(self) -> _Slot:
        if self._free_slots:
            return self._free_slots.pop()
        vk, dev = self.vk, self.device
        cmd = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(
            commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
        query = None
        if self.timestamps:
            query = vk.vkCreateQueryPool(dev, vk.VkQueryPoolCreateInfo(queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                                                                       queryCount=2), None)
        slot = _Slot(cmd, fence, query)
        slot.submit = [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])]
        slot.fences = [fence]
        return slot

    def descriptor_set(self, slot: _Slot, dsl: Any, buffers: Sequence[tuple[Any, int]]) -> Any:
        """A descriptor set of ``dsl`` in the slot's own pool, bound to ``buffers`` (buffer, size)."""
        vk, dev = self.vk, self.device
        n = len(buffers)
        if slot.pool is None or slot.pool_size < n:
            if slot.pool is not None:
                vk.vkDestroyDescriptorPool(dev, slot.pool, None)
            slot.pool_size = max(16, n)
            slot.pool = vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
                maxSets=1, poolSizeCount=1, pPoolSizes=[vk.VkDescriptorPoolSize(
                    type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=slot.pool_size)]), None)
        ds = vk.vkAllocateDescriptorSets(dev, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=slot.pool, descriptorSetCount=1, pSetLayouts=[dsl]))[0]
        writes = [vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b, offset=0, range=sz)])
                  for i, (b, sz) in enumerate(buffers)]
        vk.vkUpdateDescriptorSets(dev, len(writes), writes, 0, None)
        return ds

    def _cached_set(self, dsl: Any, buffers: Sequence[tuple[Any, int]], keys: Sequence[int]) -> Any:
        """The cached descriptor set of ``dsl`` bound to ``buffers`` (device arrays whose
        :attr:`VulkanBuffer.key` are ``keys``), made on first use; None when the cache is full."""
        key = (int(self.vk.ffi.cast("uintptr_t", dsl)), tuple(zip(keys, (sz for _, sz in buffers), strict=True)))
        ds = self._sets.get(key)
        if ds is not None:
            return ds
        if len(self._sets) >= SET_CACHE or len(buffers) > 8:
            return None
        vk = self.vk
        try:
            ds = vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
                descriptorPool=self._set_pool, descriptorSetCount=1, pSetLayouts=[dsl]))[0]
        except Exception:  # noqa: BLE001 - pool fragmented or full: no caching for this one
            return None
        writes = [vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b, offset=0, range=sz)])
                  for i, (b, sz) in enumerate(buffers)]
        vk.vkUpdateDescriptorSets(self.device, len(writes), writes, 0, None)
        self._sets[key] = ds
        for k in set(keys):
            self._sets_of.setdefault(k, []).append(key)
        return ds

    def _submit(self, record: Callable[[Any, _Slot], None], label: str, wait: bool,
                keep: Sequence[Any] = (), timed: bool = False, staging: bool = False,
                after: Callable[[], None] | None = None) -> None:
        """Record one command buffer with ``record(cmd, slot)`` and submit it with its fence;
        ``wait``: return after it (and everything before it) finished. At most
        :data:`MAX_IN_FLIGHT` submissions are in flight (the oldest is waited for first).
        Callers hold :attr:`lock`.

        Raises:
            VulkanError: the device is wedged, lost, or a dispatch did not finish in time."""
        self._check_process()
        self._check_alive(label)
        self._free_deferred()
        vk = self.vk
        while len(self._pending) >= MAX_IN_FLIGHT:
            self._retire_one(block=True)
        self._retire(block=False)
        slot = self._slot()
        slot.label, slot.keep, slot.timed = label, list(keep), bool(timed and slot.query is not None)
        slot.staging, slot.after = staging, after
        cmd = slot.cmd
        try:
            vk.vkBeginCommandBuffer(cmd, self._begin_info)
            record(cmd, slot)
            vk.vkEndCommandBuffer(cmd)
            vk.vkQueueSubmit(self.queue, 1, slot.submit, slot.fence)
        except VulkanError:
            slot.keep, slot.after = [], None  # not submitted: the caller still owns what it passed
            self._recycle(slot)
            raise
        except Exception as e:  # noqa: BLE001 - the driver's error, named
            slot.keep, slot.after = [], None
            self._recycle(slot)
            if isinstance(e, vk.VkErrorDeviceLost):
                self.wedged = f"the device was lost while submitting {label}"
            raise VulkanError(f"Vulkan on {self.name}: submitting {label} failed: {type(e).__name__}: {e}") from e
        self._pending.append(slot)
        self.submissions += 1
        if wait:
            self._retire(block=True)

    def _check_alive(self, label: str) -> None:
        if self.closing:
            what = f"the launch of {label}" if label.startswith("kernel") else label
            raise VulkanError(f"Vulkan on {self.name} refuses {what}: the process is exiting")
        if self.wedged:
            what = f"the launch of {label}" if label.startswith("kernel") else label
            raise VulkanError(f"Vulkan on {self.name} refuses {what}: {self.wedged} earlier in this process and "
                              "may still be running; restart the process to use Vulkan again")

    def _recycle(self, slot: _Slot) -> None:
        vk = self.vk
        vk.vkResetCommandBuffer(slot.cmd, 0)
        if slot.pool is not None:
            vk.vkResetDescriptorPool(self.device, slot.pool, 0)
        for b in slot.keep:
            if isinstance(b, VulkanBuffer):
                self._destroy(b)
        slot.keep = []
        self._free_slots.append(slot)

    def _retire_one(self, block: bool) -> bool:
        """Retire the oldest submission if it finished (``block``: wait for it, at most
        :data:`FENCE_TIMEOUT_NS`); returns whether it did."""
        vk, dev = self.vk, self.device
        slot = self._pending[0]
        try:
            if block:
                self._wait_fence(slot)
            else:
                vk.vkGetFenceStatus(dev, slot.fence)
        except vk.VkNotReady:
            return False
        except vk.VkTimeout:
            # The dispatch may still be running and writing its buffers: freeing them (or the
            # descriptor pool) now is a use-after-free in the driver that kills the process.
            # Keep everything in flight (leaked) and refuse further work on this device.
            self.wedged = f"{slot.label} did not finish within {self._timeout_ns() / 1e9:g} s"
            interrupt.overdue(f"{slot.label} on Vulkan ({self.name})", lambda: self._running(slot), slot)
            raise VulkanError(f"Vulkan on {self.name}: {self.wedged}; its buffers are kept (not freed) and this "
                              "process's Vulkan device refuses further launches. Restart the process to use "
                              "Vulkan again (a kernel that loops forever, or one too slow for this CPU/GPU, "
                              "causes this)") from None
        except Exception as e:  # noqa: BLE001 - VK_ERROR_DEVICE_LOST and the like
            self.wedged = f"the device was lost running {slot.label} ({type(e).__name__})"
            raise VulkanError(f"Vulkan on {self.name}: {self.wedged}; this process's Vulkan device refuses further "
                              "launches (restart the process)") from e
        self._pending.popleft()
        vk.vkResetFences(dev, 1, slot.fences)
        if slot.timed:
            ts = vk.ffi.new("uint64_t[2]")
            r = vk.lib.vkGetQueryPoolResults(dev, slot.query, 0, 2, 16, ts, 8, vk.VK_QUERY_RESULT_64_BIT
                                             | vk.VK_QUERY_RESULT_WAIT_BIT)
            if r == vk.VK_SUCCESS and self.profile is not None:
                mask = (1 << self.timestamp_bits) - 1 if self.timestamp_bits < 64 else (1 << 64) - 1
                ticks = (int(ts[1]) - int(ts[0])) & mask
                self.profile.append((slot.label, ticks * self.timestamp_period * 1e-9))
        after, slot.after = slot.after, None
        try:
            if after is not None:
                after()  # may raise (an out-of-bounds access, a cut loop): this wait reports it
        finally:
            self._recycle(slot)
        return True

    def _wait_fence(self, slot: _Slot) -> None:
        """Wait for ``slot``'s fence at most :data:`FENCE_TIMEOUT_NS` in all, in slices of
        :data:`WAIT_SLICE_NS`: between slices Python runs its signal handlers, so Ctrl-C raises
        KeyboardInterrupt within a slice (the submission stays pending, nothing is freed).

        Raises:
            vk.VkTimeout: the budget ran out; the driver's error on a lost device."""
        vk = self.vk
        budget = self._timeout_ns()
        t_end = time.monotonic_ns() + budget
        while True:
            left = t_end - time.monotonic_ns()
            try:
                vk.vkWaitForFences(self.device, 1, slot.fences, vk.VK_TRUE, max(0, min(left, WAIT_SLICE_NS)))
                return
            except vk.VkTimeout:
                if time.monotonic_ns() >= t_end:
                    raise

    def _retire(self, block: bool) -> None:
        while self._pending and self._retire_one(block):
            pass

    def synchronize(self) -> None:
        """Wait for every submitted launch (each at most :data:`FENCE_TIMEOUT_NS`).

        Raises:
            VulkanError: one did not finish in time or the device was lost (naming the kernel);
                the device is wedged by such a failure earlier; a forked child."""
        self._check_process()
        with self.lock:
            self._check_alive("a synchronize")
            self._retire(block=True)
            self._free_deferred()

    def dispatch(self, k: SpirvKernel, P: int, W: int, grid: tuple[int, int, int],
                 buffers: list[tuple[Any, int]], push: list[int], label: str,
                 staged: Sequence[tuple[VulkanBuffer, int, int, bool]] = (), keep: Sequence[Any] = (),
                 keys: Sequence[int] = (), after: Callable[[], None] | None = None) -> None:
        """Record and submit one dispatch of ``k``. ``buffers``: (VkBuffer, bytes) per binding,
        ``keys`` their :attr:`VulkanBuffer.key` (the descriptor set is cached when given and
        nothing is staged).
        ``staged``: (device buffer, staging offset, bytes, written) of NumPy arguments whose bytes
        the caller put in the staging buffer: they are copied in before the dispatch and the
        written ones back after it, and the call waits (the caller then reads the staging
        buffer). The dispatch is only submitted: the caller, having handed ``keep`` over, waits
        (:meth:`_retire`) before it reads staged results -- a wait interrupted by Ctrl-C then
        leaves nothing owned twice. Callers hold :attr:`lock`."""
        vk = self.vk
        pipe, layout, dsl, _ = self.pipeline(k, P, W)
        st = self._staging if staged else None

        def rec(cmd: Any, slot: _Slot) -> None:
            self._barrier(cmd)
            if staged:
                for b, off, n, _w in staged:
                    if n:
                        vk.vkCmdCopyBuffer(cmd, st.buf, b.buf, 1, [vk.VkBufferCopy(off, 0, n)])
                self._barrier(cmd)
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
            if buffers:
                ds = None if staged or len(keys) != len(buffers) else self._cached_set(dsl, buffers, keys)
                if ds is None:
                    ds = self.descriptor_set(slot, dsl, buffers)
                vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [ds], 0, None)
            data = vk.ffi.new("uint32_t[]", [int(w) & 0xFFFFFFFF for w in push])
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * len(push), data)
            timed = slot.query is not None and self.profile is not None
            if timed:
                vk.vkCmdResetQueryPool(cmd, slot.query, 0, 2)
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, slot.query, 0)
            vk.vkCmdDispatch(cmd, *grid)
            if timed:
                vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, slot.query, 1)
            if staged:
                self._barrier(cmd)
                for b, off, n, w in staged:
                    if w and n:
                        vk.vkCmdCopyBuffer(cmd, b.buf, st.buf, 1, [vk.VkBufferCopy(0, off, n)])
                self._host_barrier(cmd)

        self._submit(rec, label, wait=False, keep=keep, timed=self.profile is not None, staging=bool(staged),
                     after=after)


class VulkanBuffer:
    """One ``VkBuffer`` with its own ``VkDeviceMemory`` (``size`` bytes; ``mapped``: a NumPy
    byte view while the memory is mapped, the staging buffer only)."""

    __slots__ = ("buf", "mem", "size", "mapped", "key", "freed", "destroyed")

    def __init__(self, buf: Any, mem: Any, size: int, key: int = 0) -> None:
        self.buf, self.mem, self.size, self.key = buf, mem, size, key
        self.mapped: np.ndarray | None = None
        #: freed: released by its owner (its array is gone); destroyed: the Vulkan objects are
        self.freed = self.destroyed = False


class _Slot:
    """A command buffer with its fence, descriptor pool and timestamp queries, reused once the
    fence signalled; ``keep`` holds what its commands use until then."""

    __slots__ = ("cmd", "fence", "query", "pool", "pool_size", "label", "keep", "timed", "submit", "fences",
                 "staging", "after")

    def __init__(self, cmd: Any, fence: Any, query: Any) -> None:
        self.cmd, self.fence, self.query = cmd, fence, query
        self.pool: Any = None
        self.pool_size = 0
        self.label = ""
        self.keep: list[Any] = []
        self.timed = self.staging = False
        #: called once the fence signalled, before what ``keep`` holds is freed (a status record's check)
        self.after: Callable[[], None] | None = None


_DEVICE = ProcessDevice(VulkanDevice, VulkanError, "Vulkan")


def get_device() -> VulkanDevice:
    """The process-wide Vulkan device (created on first use).

    Raises:
        VulkanError: Vulkan is unusable here (the message says why), or this process is a child
            made by fork() after the device was created (use the 'spawn' start method)."""
    dev = _DEVICE.get()
    dev._check_process()
    return dev


def status() -> tuple[bool, str]:
    """(usable, reason) for the Vulkan target on this machine; never raises."""
    try:
        return True, get_device().name
    except VulkanError as e:
        return False, str(e)


# --------------------------------------------------------------------------- launching

class VulkanRunner(Driver):
    """A conformance :class:`~anywave.conformance.suite.Runner` (and the ``launch`` of the
    ``vulkan`` target): ``runner(module, kernel, grid, workgroup, args, wave_width)`` translates
    the module once per W and runs the kernel; NumPy arrays in ``args`` are staged through
    device memory and updated in place (the call then waits), ``vulkan`` device arrays
    (:class:`VulkanMemory`) are bound as they are.
    """

    error = VulkanError

    def __init__(self, device: VulkanDevice | None = None) -> None:
        super().__init__()
        self.dev = device or get_device()

    def translate(self, module: Any, wave_width: int, checked: bool) -> SpirvProgram:
        from anywave.backends.spirv import translate

        optimize_target_code()  # a bad ANYWAVE_TARGET_OPT fails here, as on the other CPU targets
        if self.dev.coop_setting_error:
            raise LaunchConfigError(self.dev.coop_setting_error)
        return translate(module, wave_width, self.dev.features, checked=checked)

    def _translate_per_lane(self, module: Any, wave_width: int, checked: bool) -> SpirvProgram:
        from anywave.backends.spirv import translate

        feats = dataclasses.replace(self.dev.features, cooperative_matrix=(), coop_wave_width=0)
        return translate(module, wave_width, feats, checked=checked)

    def check_kernel(self, k: Any, info: SpirvKernel) -> None:
        dev = self.dev
        lacking = k.capabilities & ~dev.capabilities()
        if lacking:
            raise VulkanError(f"kernel {k.name!r} declares capabilities {lacking.spellings()} that {dev.name} "
                              f"lacks (it offers {dev.capabilities().spellings()}; spec §11.1)")
        if 4 * info.push_words > dev.max_push:
            raise VulkanError(f"kernel {k.name!r} needs {4 * info.push_words} bytes of push constants for its "
                              f"scalars; {dev.name} offers {dev.max_push}")

    def __call__(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                 args: Mapping[str, Any], wave_width: int, *, sync: bool = True, check: bool | None = None,
                 **_: Any) -> None:
        """Run ``kernel``. With ``sync=False`` and only device arrays the dispatch is submitted
        and the call returns (a failure then surfaces at the next ``.numpy()`` /
        ``aw.synchronize()``); NumPy arguments always make it wait. ``check`` (default:
        ``ANYWAVE_CHECK``, else off) runs the bounds-checked build. A kernel's status record (a
        checked build, a loop the driver may cut, guarded local memory: backends.spirv_status) is
        a small host-visible buffer read when the dispatch retires: its error is raised by the
        wait that sees the dispatch finish (this call for NumPy arguments, else the next
        ``.numpy()``/``aw.synchronize()``).

        Raises:
            OutOfBoundsError: (checked build, or guarded local memory) an access left its buffer.
            LoopCutError: the driver cut a loop short (lavapipe's loop limit).
            VulkanError: a refused kernel or launch, a buffer of the wrong kind, a dispatch that
                did not finish in time, a lost device; VerifyError, LaunchConfigError: a launch rule."""
        self.dev._check_process()
        launch = self.prepare(module, kernel, grid, workgroup, args, wave_width, check=check)
        self.run(launch, launch.margs, sync)

    def check_launch(self, launch: Any) -> None:
        """A grid beyond the device's ``maxComputeWorkGroupCount`` (VulkanError)."""
        dev, g = self.dev, launch.grid
        need = launch.info.local_memory_for(launch.threads, launch.wave_width)
        if need > dev.local_memory and launch.info.cooperative_matrix:
            # the staging areas do not fit beside the kernel's own local memory at this workgroup
            # size: the per-lane fragment lowering (no staging) runs it instead
            launch.program = self._programs.get(launch.module, (launch.wave_width, launch.checked, "per-lane"),
                                                lambda: self._translate_per_lane(launch.module, launch.wave_width,
                                                                                 launch.checked))
            launch.info = self.kernel_info(launch.program, launch.module, launch.kernel.name)
            need = launch.info.local_memory_for(launch.threads, launch.wave_width)
        if need > dev.local_memory:  # the kernel's own local memory plus the lowering's staging areas
            raise VulkanError(f"kernel {launch.kernel.name!r} needs {need} bytes of local memory with "
                              f"{launch.threads} threads per workgroup ({launch.info.local_memory} of its own and "
                              f"{launch.info.scratch_per_wave} per wave for cooperative-matrix staging); "
                              f"{dev.name} has {dev.local_memory}")
        for d in range(3):
            if g[d] > dev.max_grid[d]:
                raise VulkanError(f"grid {g}: dimension {'xyz'[d]} = {g[d]} exceeds {dev.name}'s "
                                  f"maxComputeWorkGroupCount {dev.max_grid[d]}")

    def check_args(self, launch: Any) -> None:
        """A buffer that is neither a NumPy array nor a vulkan array (VulkanError)."""
        from anywave.runtime.arrays import Array

        kernel, k = launch.kernel.name, launch.kernel
        for i in launch.info.buffers:
            a = k.args[i]
            v = launch.margs[i][1]
            if isinstance(v, Array):
                if v.space.kind != "vulkan":
                    raise VulkanError(f"buffer argument {a.name!r} of kernel {kernel!r} is a {v.target} array; "
                                      "the vulkan target takes vulkan arrays or host memory")
            elif not isinstance(v, np.ndarray):
                raise VulkanError(f"buffer argument {a.name!r} of kernel {kernel!r} must be a NumPy array or a "
                                  f"vulkan array, got {type(v).__name__}")

    def run(self, launch: Any, margs: list[tuple[str, Any, Any]], sync: bool) -> None:
        """Launch ``launch`` with ``margs`` (checked: :meth:`check_args`, or by the layer that bound
        it); see :meth:`__call__`."""
        from anywave.runtime.arrays import Array

        dev = self.dev
        dev._check_process()
        kernel, wave_width = launch.kernel.name, launch.wave_width
        info, k, g, wg = launch.info, launch.kernel, launch.grid, launch.workgroup
        push: list[int] = []
        for i, words in info.push:
            w = int(margs[i][1])
            push += [w & 0xFFFFFFFF, w >> 32] if words == 2 else [w]
        push += list(wg)
        args_in = [(k.args[i], margs[i][1]) for i in info.buffers]
        if launch.dims is None:
            return
        label = f"kernel {kernel!r} grid={g} workgroup={wg}"
        with dev.lock:
            dev._check_alive(label)  # before staging anything: the refusal names the kernel
            temps: list[VulkanBuffer] = []
            try:
                binds: list[tuple[Any, int]] = []
                keys: list[int] = []
                hosts: list[tuple[Any, np.ndarray, np.ndarray, int, int]] = []
                total = 0
                for a, v in args_in:
                    if isinstance(v, Array):
                        b = v.handle
                        if b.freed:
                            raise VulkanError(f"buffer argument {a.name!r} of kernel {kernel!r}: the vulkan array's "
                                              "memory was freed")
                        binds.append((b.buf, b.size))
                        keys.append(b.key)
                        continue
                    host = np.ascontiguousarray(v)
                    nb = host.nbytes
                    b = dev.alloc(nb)
                    temps.append(b)
                    binds.append((b.buf, b.size))
                    hosts.append((a, v, host, total, nb))
                    total += -(-max(nb, 1) // 16) * 16
                after = None
                reported: list[Exception] = []
                if info.status:  # the status record (backends.spirv_status), bound last, read at retire
                    from anywave.backends.bounds import ERR_WORDS
                    from anywave.backends.spirv_status import raise_if_failed

                    # the record, then each buffer's byte size (what a checked build guards)
                    rec0 = np.zeros(ERR_WORDS + len(args_in), np.uint32)
                    rec0[ERR_WORDS:] = [min(int(v.nbytes), 0xFFFFFFFF) for _a, v in args_in]
                    sb = dev.status_buffer(rec0)
                    temps.append(sb)
                    binds.append((sb.buf, sb.size))
                    sizes, where = launch.bounds_sizes(margs), f"Vulkan ({dev.name})"

                    def after(sb: VulkanBuffer = sb, sizes: list[int] = sizes, where: str = where) -> None:
                        rec = sb.mapped[:4 * ERR_WORDS].view(np.uint32).copy()
                        try:
                            raise_if_failed(rec, k, info.sites, sizes, info.local_memory, where, info.checked)
                        except WaveError as e:
                            reported.append(e)  # this launch's own error: its results are complete
                            raise
                staged = []
                if hosts:
                    st = dev.staging(total)
                    for a, _v, host, off, nb in hosts:
                        st.mapped[off:off + nb] = host.reshape(-1).view(np.uint8)
                        # the buffer's padding (to 16 bytes, inside the descriptor's range) gets zeros:
                        # an unchecked read past the array's end sees 0, not stale memory
                        pad = min(-(-max(nb, 1) // 16) * 16, temps[len(staged)].size)
                        st.mapped[off + nb:off + pad] = 0
                        written = a.access is not Access.READ
                        staged.append((temps[len(staged)], off, pad, written))
                        dev.transfers["to_device"] += 1
                        dev.transfers["to_device_bytes"] += nb
                        if written:
                            dev.transfers["to_host"] += 1
                            dev.transfers["to_host_bytes"] += nb
                try:
                    dev.dispatch(info, launch.threads, wave_width, g, binds, push, label, staged,
                                 keep=temps, keys=keys, after=after)
                except VulkanError:
                    raise
                except Exception as e:  # noqa: BLE001
                    raise VulkanError(f"launch of {kernel!r} on {dev.name} failed: {type(e).__name__}: {e}") from e
                temps = []  # owned by the submission now (freed when it retires)
                if hosts:
                    try:
                        dev._retire(block=True)
                    except WaveError as e:
                        if not reported or e is not reported[0]:
                            raise
                    st = dev._staging
                    for a, v, host, off, nb in hosts:
                        if a.access is not Access.READ and nb:
                            out = host if host is v else host.copy()
                            out.reshape(-1).view(np.uint8)[...] = st.mapped[off:off + nb]
                            if out is not v:
                                v[...] = out
                    if reported:  # written buffers hold what the in-bounds lanes stored, as on the emulator
                        raise reported[0]
                elif sync:
                    dev._retire(block=True)
            finally:
                for b in temps:
                    dev._free_locked(b)
        if not hosts and not sync:
            from anywave.runtime.arrays import mark_used

            mark_used(memory_space())


class DeviceArrayRunner:
    """A conformance runner that runs every case on ``vulkan`` device arrays: each NumPy
    argument is copied into an ``aw.empty(..., target="vulkan")`` array, the launch is only
    submitted (``sync=False``: no NumPy argument is left, so nothing is staged by the launch),
    and the arrays are copied back with ``.numpy()`` into the caller's arrays. The same checks
    and errors as :class:`VulkanRunner` (it launches through one)."""

    def __init__(self, runner: VulkanRunner | None = None) -> None:
        self.runner = runner or VulkanRunner()
        self.dev = self.runner.dev

    def __call__(self, module: Any, kernel: str, grid: Sequence[int], workgroup: Sequence[int],
                 args: Mapping[str, Any], wave_width: int, **kw: Any) -> None:
        from anywave.runtime.arrays import empty

        dargs: dict[str, Any] = {}
        back = []
        for n, v in args.items():
            if isinstance(v, np.ndarray):
                d = empty(v.shape, v.dtype, target="vulkan")
                if v.nbytes:
                    d.assign(v)
                dargs[n] = d
                back.append((v, d))
            else:
                dargs[n] = v
        self.runner(module, kernel, grid, workgroup, dargs, wave_width, sync=False)
        for v, d in back:
            if v.flags.writeable and v.nbytes:
                v[...] = d.numpy()


def vulkan_runner() -> VulkanRunner:
    """A conformance runner on the default Vulkan device.

    Raises:
        VulkanError: no usable Vulkan device."""
    return VulkanRunner()


class VulkanTarget(RunnerTarget):
    """The ``vulkan`` target for :mod:`anywave.runtime.targets`: ``info`` and ``launch``."""

    name = "vulkan"

    def __init__(self, wave_width: int | None = None) -> None:
        runner = VulkanRunner()
        widths = runner.dev.features.wave_widths
        super().__init__(wave_width if wave_width is not None else (widths[0] if widths else runner.dev.subgroup_size))
        self.info.details.update(self.runner.dev.details())  # type: ignore[attr-defined]

    def make_runner(self) -> VulkanRunner:
        return VulkanRunner()


class VulkanMemory:
    """The ``vulkan`` memory space (:class:`anywave.runtime.arrays.MemorySpace`): device-local
    storage buffers of the process-wide device; ``from_host``/``to_host`` go through its staging
    buffer after the work submitted before."""

    kind = name = "vulkan"

    def __init__(self, device: int = 0) -> None:
        if device != 0:
            raise VulkanError(f"the vulkan target has one device (0), asked for device {device}")
        self.device = 0
        self.dev = get_device()

    def allocate(self, nbytes: int) -> tuple[Any, int, Any]:
        if not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise VulkanError(f"a vulkan array of {nbytes!r} bytes: the size must be a non-negative int")
        self.dev._check_process()
        b = self.dev.alloc(max(int(nbytes), 16))
        dev = self.dev
        return b, 0, lambda: dev.free(b)

    def from_host(self, handle: Any, host: np.ndarray) -> None:
        self.dev.upload(handle, host)

    def to_host(self, handle: Any, host: np.ndarray) -> None:
        self.dev.download(handle, host)

    def zero(self, handle: Any) -> None:
        """Zero the allocation on the device (no bytes from the host)."""
        self.dev.fill_zero(handle)

    def synchronize(self) -> None:
        self.dev.synchronize()


_MEMORY: list[VulkanMemory] = []


def memory_space(device: int = 0) -> VulkanMemory:
    """The ``vulkan`` memory space (one per process).

    Raises:
        VulkanError: Vulkan unusable here, or ``device`` != 0."""
    if device != 0 or not _MEMORY:
        sp = VulkanMemory(device)
        _MEMORY.append(sp)
    return _MEMORY[0]


@contextlib.contextmanager
def profile() -> Iterator[list[tuple[str, float]]]:
    """Record the device time of every dispatch submitted inside the block, from timestamp
    queries written just before and after it (``limits.timestampPeriod`` ns per tick). Yields
    a list that holds ``(label, seconds)`` per dispatch, in submission order, once the block
    ends (it synchronizes).

    Raises:
        VulkanError: the device offers no timestamps on its compute queue (timestampValidBits 0)."""
    dev = get_device()
    if not dev.timestamps:
        raise VulkanError(f"{dev.name} writes no timestamps on its compute queue (timestampValidBits = 0)")
    dev.synchronize()
    out: list[tuple[str, float]] = []
    dev.profile = out
    try:
        yield out
        dev.synchronize()
    finally:
        dev.profile = None


def register() -> None:
    """Register the ``vulkan`` target with :mod:`anywave.runtime.targets`."""
    VulkanTarget.register(status)


