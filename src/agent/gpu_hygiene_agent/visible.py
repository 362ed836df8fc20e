"""Which NVML device each CUDA device index is: ``CUDA_VISIBLE_DEVICES`` (indices, GPU UUIDs,
MIG UUIDs) mapped onto NVML's enumeration, and the MIG instances of a GPU in MIG mode."""

import re


def cuda_visible_targets(env_value, nvml_uuids, mig_uuids=()):
    """Map CUDA device indices to NVML devices, following ``CUDA_VISIBLE_DEVICES``.

    ``env_value``: the variable's value (str) or None when unset. ``nvml_uuids``: list of the
    NVML devices' UUID strings, by NVML index (length = NVML device count). ``mig_uuids``:
    [(nvml index, slot, uuid)] of the MIG instances of GPUs in MIG mode (``slot``: the
    instance's position among its GPU's).
    Returns a list of (nvml index, slot); position ``i`` is CUDA device ``i``, ``slot`` is None
    for a whole GPU. Entries are integer indices, GPU UUIDs (``GPU-...``, a unique prefix is
    enough, "GPU-" may be left out) or MIG UUIDs (``MIG-...``, a unique prefix); like CUDA,
    the list ends at the first entry that is invalid, unknown or repeated. NVML and CUDA are
    assumed to enumerate devices in the same (PCI bus) order, which is CUDA's order with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and in practice on single-model machines.
    """
    count = len(nvml_uuids)
    if env_value is None:
        return [(i, None) for i in range(count)]
    result = []
    for token in env_value.split(","):
        token = token.strip()
        if not token:
            break
        if re.fullmatch(r"[+-]?\d+", token):
            index = int(token)
            if index < 0 or index >= count:
                break
            target = (index, None)
        elif token.upper().startswith("MIG-"):
            found = [(i, slot) for i, slot, uuid in mig_uuids if uuid and uuid.startswith(token)]
            if len(found) != 1:
                break
            target = found[0]
        else:
            wanted = token if token.upper().startswith("GPU-") else "GPU-" + token
            matches = [i for i, uuid in enumerate(nvml_uuids) if uuid and uuid.startswith(wanted)]
            if len(matches) != 1:
                break
            target = (matches[0], None)
        if target in result:
            break
        result.append(target)
    return result


def cuda_visible_nvml_indices(env_value, nvml_uuids):
    """``cuda_visible_targets`` without MIG instances: the NVML indices (list of int)."""
    return [index for index, _slot in cuda_visible_targets(env_value, nvml_uuids)]


def mig_instances(nvml, handle):
    """[(MIG device handle, uuid or None)] of a GPU in MIG mode; [] for any other GPU, or
    where the driver or pynvml cannot say (``nvmlDeviceGetMigMode`` answers "not supported" on
    GPUs without MIG)."""
    try:
        current = nvml.nvmlDeviceGetMigMode(handle)[0]
        if current != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
            return []
        count = int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))
    except Exception:
        return []
    out = []
    for slot in range(count):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except Exception:
            continue  # no instance in this slot ("not found")
        try:
            uuid = nvml_text(nvml.nvmlDeviceGetUUID(mig))
        except Exception:
            uuid = None
        out.append((mig, uuid))
    return out


def nvml_text(value):
    """An NVML string (bytes in older pynvml, str in newer) as str."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
