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

Launch: buffers live in host-visible, host-coherent memory (NumPy arrays are copied in and out);
scalars and the workgroup size are push constants; the workgroup is one dimension of x*y*z
threads (padded to a multiple of W for kernels with wave operations). Pipelines are cached by
(SPIR-V module hash, launched workgroup size), modules by (module object, W).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from anywave.backends.spirv import WAVE_WIDTHS, SpirvKernel, SpirvProgram, VulkanFeatures
from anywave.errors import WaveError
from anywave.isa.types import Access, Capability
from anywave.runtime.driver import Driver
from anywave.runtime.targets import ProcessDevice, RunnerTarget

#: how long a dispatch may take before the device is declared wedged (nanoseconds)
FENCE_TIMEOUT_NS = 60 * 10**9

class VulkanError(WaveError):
    """Vulkan is unavailable (no binding, loader, ICD or device), a pipeline failed to build, or
    a launch was refused or failed; the message says which and why."""


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
        props = vk.vkGetPhysicalDeviceProperties(pd)
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
        f13 = vk.VkPhysicalDeviceVulkan13Features()
        f2 = vk.VkPhysicalDeviceFeatures2(pNext=f13)
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
        self.features = VulkanFeatures(fp64=self.fp64, int64=int64, wave_widths=widths,
                                       loop_limit=65535 if lavapipe else 0, guard_local=lavapipe, **self.float_controls)
        # device with one compute queue and the features the lowering uses
        fams = vk.vkGetPhysicalDeviceQueueFamilyProperties(pd)
        qf = next((i for i, f in enumerate(fams) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
        if qf is None:
            raise VulkanError(f"{self.name} has no compute queue")
        self.qf = qf
        en13 = vk.VkPhysicalDeviceVulkan13Features(subgroupSizeControl=bool(widths), computeFullSubgroups=bool(widths))
        en = vk.VkPhysicalDeviceFeatures2(pNext=en13, features=vk.VkPhysicalDeviceFeatures(
            shaderFloat64=self.fp64, shaderInt64=int64))
        qinfo = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=qf, queueCount=1, pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(pd, vk.VkDeviceCreateInfo(pNext=en, queueCreateInfoCount=1,
                                                                   pQueueCreateInfos=[qinfo]), None)
        self.queue = vk.vkGetDeviceQueue(self.device, qf, 0)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            queueFamilyIndex=qf, flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self.cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self.fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(), None)
        mp = vk.vkGetPhysicalDeviceMemoryProperties(pd)
        want_flags = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        self._mem_types = [i for i in range(mp.memoryTypeCount)
                           if (mp.memoryTypes[i].propertyFlags & want_flags) == want_flags]
        if not self._mem_types:
            raise VulkanError(f"{self.name} has no host-visible, host-coherent memory type")
        self._pipelines: dict[tuple[str, int], Any] = {}
        self.lock = threading.Lock()
        #: why the device is unusable (a dispatch that timed out may still run), or "" if it is not
        self.wedged = ""

    def capabilities(self) -> Capability:
        caps = Capability.F16 | Capability.BF16 | Capability.OFFSET64 | Capability.ATOMIC_F32
        if self.fp64:
            caps |= Capability.F64
        if self.features.int64:
            caps |= Capability.INT64
        if self.features.wave_widths:
            caps |= Capability.WAVE_OPS | Capability.MMA
        return caps

    def details(self) -> dict[str, Any]:
        fc = self.float_controls
        return {"api_version": self.api_version, "driver": self.driver, "driver_version": self.driver_version,
                "subgroup_size": self.subgroup_size, "subgroup_size_range": self.subgroup_range,
                "float_controls": {k: list(v) for k, v in fc.items()},
                "missing_float_controls": [f"{k}{w}" for k, v in fc.items() for w in (32, 64) if w not in v]}

    # ---- memory
    def alloc(self, nbytes: int) -> tuple[Any, Any, int]:
        vk = self.vk
        size = max(16, -(-nbytes // 16) * 16)
        if size > self.max_buffer:
            raise VulkanError(f"buffer of {nbytes} bytes exceeds {self.name}'s maxStorageBufferRange {self.max_buffer}")
        buf = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=size, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, buf)
        ti = next((i for i in self._mem_types if req.memoryTypeBits >> i & 1), None)
        if ti is None:
            vk.vkDestroyBuffer(self.device, buf, None)
            raise VulkanError(f"{self.name}: no host-visible memory type fits a storage buffer")
        mem = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                       memoryTypeIndex=ti), None)
        vk.vkBindBufferMemory(self.device, buf, mem, 0)
        return buf, mem, size

    def free(self, buf: Any, mem: Any) -> None:
        if self.wedged:  # a dispatch may still be writing it: keep it (see run)
            return
        self.vk.vkDestroyBuffer(self.device, buf, None)
        self.vk.vkFreeMemory(self.device, mem, None)

    def mapped(self, mem: Any, size: int) -> np.ndarray:
        ptr = self.vk.vkMapMemory(self.device, mem, 0, size, 0)
        return np.frombuffer(ptr, dtype=np.uint8, count=size)

    # ---- pipelines
    def pipeline(self, k: SpirvKernel, P: int, W: int) -> Any:
        """(pipeline, layout, set layout) for kernel ``k`` launched with P threads per workgroup,
        cached by (module hash, P)."""
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
            pipes = vk.vkCreateComputePipelines(dev, vk.VK_NULL_HANDLE, 1, [vk.VkComputePipelineCreateInfo(
                stage=stage, layout=layout)], None)
        except Exception as e:  # noqa: BLE001 - carry the driver's answer
            raise VulkanError(f"vkCreateComputePipelines failed on {self.name} for kernel {k.name!r}: "
                              f"{type(e).__name__}: {e}") from e
        pipe = pipes[0]
        hit = self._pipelines[key] = (pipe, layout, dsl, sm)
        return hit

    def run(self, k: SpirvKernel, P: int, W: int, grid: tuple[int, int, int], buffers: list[tuple[Any, int]],
            push: list[int]) -> None:
        """Record, submit and wait for one dispatch (at most :data:`FENCE_TIMEOUT_NS`).

        Raises:
            VulkanError: the device is wedged by an earlier dispatch that did not finish, or this
                one did not finish in time (then the device is wedged from now on)."""
        if self.wedged:
            raise VulkanError(f"Vulkan on {self.name} refuses the launch of {k.name!r}: {self.wedged} earlier in "
                              "this process and may still be running; restart the process to use Vulkan again")
        vk, dev = self.vk, self.device
        pipe, layout, dsl, _ = self.pipeline(k, P, W)
        pool = None
        try:
            cmd = self.cmd
            vk.vkResetCommandBuffer(cmd, 0)
            vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
                flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
            vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
            if buffers:
                pool = vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
                    maxSets=1, poolSizeCount=1, pPoolSizes=[vk.VkDescriptorPoolSize(
                        type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=len(buffers))]), None)
                ds = vk.vkAllocateDescriptorSets(dev, vk.VkDescriptorSetAllocateInfo(
                    descriptorPool=pool, descriptorSetCount=1, pSetLayouts=[dsl]))[0]
                writes = [vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=i, descriptorCount=1,
                                                  descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                  pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b, offset=0, range=sz)])
                          for i, (b, sz) in enumerate(buffers)]
                vk.vkUpdateDescriptorSets(dev, len(writes), writes, 0, None)
                vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [ds], 0, None)
            data = vk.ffi.new("uint32_t[]", [int(w) & 0xFFFFFFFF for w in push])
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * len(push), data)
            vk.vkCmdDispatch(cmd, *grid)
            barrier = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                         dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
            vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT, 0,
                                    1, [barrier], 0, None, 0, None)
            vk.vkEndCommandBuffer(cmd)
            vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[cmd])],
                             self.fence)
            try:
                vk.vkWaitForFences(dev, 1, [self.fence], vk.VK_TRUE, FENCE_TIMEOUT_NS)
            except vk.VkTimeout:
                # The dispatch may still be running and writing the buffers: freeing them (or
                # the descriptor pool) now is a use-after-free in the driver that kills the
                # process. Keep them (leaked) and refuse further work on this device.
                self.wedged = (f"a dispatch of kernel {k.name!r} did not finish within "
                               f"{FENCE_TIMEOUT_NS / 1e9:.0f} s")
                pool = None
                raise VulkanError(f"Vulkan on {self.name}: {self.wedged}; its buffers are kept (not freed) and "
                                  "this process's Vulkan device refuses further launches. Restart the process "
                                  "to use Vulkan again (a kernel that loops forever, or one too slow for this "
                                  "CPU/GPU, causes this)") from None
            vk.vkResetFences(dev, 1, [self.fence])
        finally:
            if pool is not None:
                vk.vkDestroyDescriptorPool(dev, pool, None)


_DEVICE = ProcessDevice(VulkanDevice, VulkanError, "Vulkan")


def get_device() -> VulkanDevice:
    """The process-wide Vulkan device (created on first use).

    Raises:
        VulkanError: Vulkan is unusable here (the message says why)."""
    return _DEVICE.get()


def status() -> tuple[bool, str]:
    """(usable, reason) for the Vulkan target on this machine; never raises."""
    return _DEVICE.status()


# --------------------------------------------------------------------------- launching

class VulkanRunner(Driver):
    """A conformance :class:`~anywave.conformance.suite.Runner` (and the ``launch`` of the
    ``vulkan`` target): ``runner(module, kernel, grid, workgroup, args, wave_width)`` translates
    the module once per W and runs the kernel with the NumPy arrays of ``args`` updated in place.
    """

    error = VulkanError

    def __init__(self, device: VulkanDevice | None = None) -> None:
        super().__init__()
        self.dev = device or get_device()

    def translate(self, module: Any, wave_width: int, checked: bool) -> SpirvProgram:
        from anywave.backends.spirv import translate

        return translate(module, wave_width, self.dev.features, checked=checked)

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
                 args: Mapping[str, Any], wave_width: int, *, check: bool | None = None, **_: Any) -> None:
        """Run ``kernel``; ``check`` (default: ``ANYWAVE_CHECK=1``) runs the bounds-checked build.

        Raises:
            OutOfBoundsError: (checked build) a memory access left its buffer.
            LoopCutError: the driver cut a loop short (lavapipe's loop limit).
            VulkanError, VerifyError, LaunchConfigError: see the module docs."""
        dev = self.dev
        launch = self.prepare(module, kernel, grid, workgroup, args, wave_width, check=check)
        info, k, margs, g, wg = launch.info, launch.kernel, launch.margs, launch.grid, launch.workgroup
        for d in range(3):
            if g[d] > dev.max_grid[d]:
                raise VulkanError(f"grid {g}: dimension {'xyz'[d]} = {g[d]} exceeds {dev.name}'s "
                                  f"maxComputeWorkGroupCount {dev.max_grid[d]}")
        push: list[int] = []
        for i, words in info.push:
            w = int(margs[i][1])
            push += [w & 0xFFFFFFFF, w >> 32] if words == 2 else [w]
        push += list(wg)
        hosts = []
        for i in info.buffers:
            a = k.args[i]
            v = margs[i][1]
            if not isinstance(v, np.ndarray):
                raise VulkanError(f"buffer argument {a.name!r} of kernel {kernel!r} must be a NumPy array, "
                                  f"got {type(v).__name__}")
            hosts.append((a, v))
        if launch.dims is None:
            return
        P = launch.threads
        with dev.lock:
            allocs = []
            try:
                for a, v in hosts:
                    host = np.ascontiguousarray(v)
                    raw = host.reshape(-1).view(np.uint8)
                    buf, mem, size = dev.alloc(raw.size)
                    allocs.append((buf, mem))
                    view = dev.mapped(mem, size)
                    view[:raw.size] = raw
                    view[raw.size:] = 0
                    allocs[-1] = (buf, mem, view, a, v, host, raw.size, size)
                bound = [(x[0], x[7]) for x in allocs]
                if info.status:  # the status record (backends.spirv_status), bound last
                    from anywave.backends.bounds import ERR_WORDS

                    sbuf, smem, ssize = dev.alloc(4 * (ERR_WORDS + len(hosts)))
                    allocs.append((sbuf, smem))
                    status = dev.mapped(smem, ssize)
                    status[:] = 0  # the record, then each buffer's byte size (what a checked build guards)
                    status[4 * ERR_WORDS:4 * (ERR_WORDS + len(hosts))].view(np.uint32)[:] = [
                        min(v.nbytes, 0xFFFFFFFF) for _a, v in hosts]
                    allocs[-1] = (sbuf, smem, status, None, None, None, 0, ssize)
                    bound.append((sbuf, ssize))
                try:
                    dev.run(info, P, wave_width, g, bound, push)
                except VulkanError:
                    raise
                except Exception as e:  # noqa: BLE001
                    raise VulkanError(f"launch of {kernel!r} on {dev.name} failed: {type(e).__name__}: {e}") from e
                for _buf, _mem, view, a, v, host, nb, _sz in allocs:
                    if a is not None and a.access is not Access.READ and nb:
                        out = host if host is v else host.copy()
                        out.reshape(-1).view(np.uint8)[...] = view[:nb]
                        if out is not v:
                            v[...] = out
                if info.status:
                    from anywave.backends.spirv_status import raise_if_failed

                    rec = allocs[-1][2][:4 * ERR_WORDS].view(np.uint32).copy()
                    raise_if_failed(rec, k, info.sites, launch.bounds_sizes(), info.local_memory,
                                    f"Vulkan ({dev.name})", info.checked)
            finally:
                for x in allocs:
                    dev.vk.vkUnmapMemory(dev.device, x[1]) if len(x) > 2 else None
                    dev.free(x[0], x[1])


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


def register() -> None:
    """Register the ``vulkan`` target with :mod:`anywave.runtime.targets`."""
    VulkanTarget.register(status)


