/**
 * Comm protocol between the browser and the kernel-side agent, version 2.
 *
 * The wire format is documented in `docs/protocol.md`. Every kernel message is
 * validated here before anything else reads it: a message that does not match
 * is dropped (and counted by the connection), never thrown into the UI.
 *
 * Units: bytes (integers) for memory, seconds since the epoch for `t`,
 * milliseconds for durations. `null` means "not measurable in this kernel".
 */
import * as z from 'zod/mini';
import { PROTOCOL_VERSION } from './protocol-constants';

// This module loads zod: modules on JupyterLab's start path import only its
// types (`import type`), and the constants from src/protocol-constants.ts;
// the validator comes with the agent's chunk (src/agent-chunk.ts).
import { GPU_PROCESSES_MAX_PER_DEVICE } from './protocol-constants';
export {
  CLEAN_MARKER,
  COMM_TARGET,
  GPU_PROCESSES_MAX_PER_DEVICE,
  PROTOCOL_VERSION
} from './protocol-constants';

/** Most devices in a `gpuProcesses` message. */
export const GPU_PROCESSES_MAX_DEVICES = 16;

const bytes = z.int().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER));
const percent = z.number().check(z.minimum(0), z.maximum(100));
const nullableBytes = z.nullable(bytes);
const count = bytes;
const shortText = z.string().check(z.maxLength(10_000));
/** A device name: `"cpu"`, `"cuda:0"`, ... */
const deviceName = z.string().check(z.maxLength(64));
/** Bytes per device name (`"cpu"`, `"cuda:0"`, ...). */
const bytesPerDevice = z.record(deviceName, bytes);
const envelope = { protocol: z.literal(PROTOCOL_VERSION) };
const rootKind = z.enum(['variable', 'output', 'traceback', 'hidden']);

const deviceInfo = z.object({
  index: count,
  nvmlIndex: count,
  name: shortText,
  total: bytes,
  uuid: z.nullable(shortText)
});

/** What the environment lacks that the agent degrades from (docs/protocol.md, Limits). */
const limit = z.object({
  area: z.enum(['holders', 'models', 'owners', 'provenance']),
  library: z.string().check(z.maxLength(200)),
  version: z.string().check(z.maxLength(200))
});
/** At most 32 limits are sent (`degrade.MAX_LIMITS`); a list up to 100 is accepted. */
const limits = z.optional(z.array(limit).check(z.maxLength(100)));

const hello = z.object({
  ...envelope,
  type: z.literal('hello'),
  agentVersion: shortText,
  python: shortText,
  pid: count,
  torch: z.nullable(shortText),
  nvml: z.boolean(),
  nvmlError: z.nullable(shortText),
  devices: z.array(deviceInfo).check(z.maxLength(64)),
  limits
});

const deviceSample = z.object({
  index: count,
  used: nullableBytes,
  total: nullableBytes,
  process: nullableBytes,
  allocated: nullableBytes,
  reserved: nullableBytes,
  cached: nullableBytes,
  nonTorch: nullableBytes,
  processHidden: z.boolean(),
  /** The lowest allocated read since the previous sample (absent from agents before 0.6.0). */
  allocatedMin: z.optional(nullableBytes),
  /** The caching allocator's cap (`set_per_process_memory_fraction`), or null (absent: older agents). */
  limit: z.optional(nullableBytes),
  /** GPU-Util, percent (NVML; absent before agent 0.13.0). */
  utilization: z.optional(z.nullable(percent)),
  /** This kernel's SM share since the previous sample, percent (NVML; absent before 0.13.0). */
  processUtilization: z.optional(z.nullable(percent))
});

/**
 * The running Ultralytics trainer's progress in a `sample`: `epoch` its
 * 0-based epoch in progress, `epochs` its total.
 */
const trainingProgress = z.object({
  epoch: count,
  epochs: z.int().check(z.minimum(1), z.maximum(Number.MAX_SAFE_INTEGER))
});

const sample = z.object({
  ...envelope,
  type: z.literal('sample'),
  t: z.number().check(z.minimum(0)),
  seq: count,
  busy: z.boolean(),
  devices: z.array(deviceSample).check(z.maxLength(64)),
  /** While a cell trains an Ultralytics model: its trainer's epoch (absent otherwise). */
  progress: z.optional(z.nullable(trainingProgress)),
  /**
   * Agent 0.12.0: the kernel process's resident memory (`/proc/self/statm`)
   * and the memory it may use (physical, or its cgroup's limit when lower),
   * bytes; null where they cannot be read (not Linux).
   */
  ram: z.optional(z.object({ rss: nullableBytes, total: nullableBytes })),
  /**
   * Agent 0.16.0: the pids of the kernel's direct child processes (a
   * DataLoader worker is one), sorted, at most 64 (`/proc`); absent where
   * they cannot be read.
   */
  children: z.optional(z.array(count).check(z.maxLength(64)))
});

/** `hex(id())` of a Python object, as the agent writes it. */
const valueId = z.string().check(z.regex(/^0x[0-9a-f]{1,16}$/));

const holder = z.object({
  kind: rootKind,
  name: shortText,
  path: shortText,
  /** The root reaches only submodules of the model (a loop variable over its layers). */
  submodule: z.optional(z.boolean()),
  /**
   * A variable holder only (agent 0.8.0): `hex(id())` of what the variable
   * held when the inventory was built; a fix cell acts on the name only while
   * it still holds that object.
   */
  valueId: z.optional(valueId)
});

const part = z.object({
  path: shortText,
  kind: z.enum(['model', 'optimizer', 'tensor']),
  className: shortText,
  bytes: bytesPerDevice,
  /** Roots that name this part other than through its model (`ema`). */
  holders: z.optional(z.array(holder).check(z.maxLength(1000)))
});

const modelInfo = z.object({
  id: z.string().check(z.maxLength(64)),
  order: count,
  className: shortText,
  module: shortText,
  family: z.enum(['ultralytics', 'transformers', 'torch']),
  label: shortText,
  parameters: count,
  bytes: bytesPerDevice,
  parts: z.array(part).check(z.maxLength(1000)),
  holders: z.array(holder).check(z.maxLength(1000)),
  stale: z.boolean(),
  /**
   * Made without running its constructor (agent 0.10.0): `copy.deepcopy`,
   * pickle or a whole-model `torch.load`, as an EMA or a best checkpoint is
   * made. Absent for a model built by its constructor, and wherever the
   * agent cannot tell (torch without module registration hooks, models that
   * existed before the agent started).
   */
  copied: z.optional(z.boolean()),
  /**
   * Agent 0.12.0, for a model no root reaches (its holders all `hidden`):
   * it is not garbage waiting for `gc.collect()`. `holder`: what keeps it,
   * found by a bounded search up its referrers to a module's globals or the
   * notebook's namespace (`"module helpers: ._MODEL"`, `"the notebook's
   * namespace: .Cache.model"`), or null where none was found; `survived`: it was already
   * reached by nothing before a full collection (`gc.collect()`, generation
   * 2) and is still alive after it.
   */
  outside: z.optional(
    z.object({ holder: z.nullable(shortText), survived: z.boolean() })
  )
});

const lastError = z.object({
  type: shortText,
  message: shortText,
  frames: z
    .array(z.object({ name: shortText, bytes: bytesPerDevice, tensors: count }))
    .check(z.maxLength(1000)),
  bytes: bytesPerDevice
});

/**
 * Where a root's bytes were allocated (agent 0.14.0, with provenance on):
 * `group` indexes the inventory's `provenance.groups`.
 */
const rootOrigin = z.object({
  group: count,
  bytes,
  /** Of `bytes`, what another root keeps too (agent 0.15.0; absent: none or older). */
  shared: z.optional(bytes)
});

const rootBytes = z.object({
  kind: rootKind,
  name: shortText,
  bytes: bytesPerDevice,
  sole: z.optional(bytesPerDevice),
  shared: z.optional(bytesPerDevice),
  sharedWith: z.optional(z.array(shortText).check(z.maxLength(100))),
  cells: z.optional(z.array(count).check(z.maxLength(10_000))),
  models: count,
  tensors: count,
  /**
   * A `variable` root only (agent 0.9.0): `hex(id())` of what the variable held when the
   * inventory was built; Move to CPU… or Delete… acts on the name only while it still holds
   * that object.
   */
  valueId: z.optional(valueId),
  /** Its largest origins, at most 3 (agent 0.14.0, provenance on). */
  origins: z.optional(z.array(rootOrigin).check(z.maxLength(100)))
});

const tensorInfo = z.object({
  path: shortText,
  kind: z.enum(['variable', 'output', 'traceback']),
  device: deviceName,
  bytes,
  shape: z.array(count).check(z.maxLength(64)),
  dtype: z.string().check(z.maxLength(64)),
  gradFn: z.nullable(shortText)
});

const graphHolder = z.object({
  name: shortText,
  path: shortText,
  /**
   * What `name` holds: a tensor, a plain container, or (agent 0.12.0) another
   * object whose walk reached the tensors (`path` says where: `h.loss`).
   */
  container: z.enum(['list', 'tuple', 'dict', 'set', 'tensor', 'object']),
  count,
  gradFn: shortText,
  bytes: bytesPerDevice,
  nodes: count,
  truncated: z.boolean(),
  /**
   * The forward hooks that feed it (agent 0.10.0): the hooked module's path
   * from the variable naming its model (`m[0]`), that variable, the
   * `_modules` keys from its model down to the module, and the hook's key in
   * `_forward_hooks`.
   */
  hooks: z.optional(
    z
      .array(
        z.object({
          module: shortText,
          variable: shortText,
          modules: z.array(shortText).check(z.maxLength(1000)),
          key: z.int()
        })
      )
      .check(z.maxLength(100))
  ),
  /**
   * The variable `name` (agent 0.9.0): `hex(id())` of what the variable held when the
   * inventory was built; Fix… (detach) acts on the name only while it still holds
   * that object.
   */
  valueId: z.optional(valueId),
  /**
   * Agent 0.12.0: `output` for an object of IPython's output cache (a displayed
   * `sum(losses) / len(losses)`): `name` is its `Out[N]` (else its first name),
   * `names` all of IPython's names of it (`Out[N]`, `_N`, `_`...), `valueId`
   * its `hex(id())`. Absent: a user variable.
   */
  root: z.optional(z.enum(['output'])),
  names: z.optional(z.array(shortText).check(z.maxLength(100))),
  /**
   * Agent 0.12.0: the `name`s of the other graph holders whose graphs keep some
   * of the same storages (detaching this one alone frees those only when they
   * are detached too).
   */
  sharedWith: z.optional(z.array(shortText).check(z.maxLength(20)))
});

const allocatorDevice = z.object({
  index: count,
  reserved: bytes,
  allocated: bytes,
  active: bytes,
  inactiveSplit: bytes,
  releasable: bytes,
  segments: count,
  allocRetries: count
});

const allocator = z.object({
  expandableSegments: z.boolean(),
  devices: z.array(allocatorDevice).check(z.maxLength(64))
});

const childProcess = z.object({
  pid: count,
  ppid: count,
  name: shortText,
  cmdline: shortText,
  rss: bytes,
  cuda: z.nullable(z.boolean()),
  cudaSource: z.nullable(z.enum(['nvml', 'fd']))
});

const workerHolder = z.object({
  kind: z.enum(['variable', 'output']),
  name: shortText,
  path: shortText,
  className: shortText,
  persistent: z.boolean(),
  pids: z.array(count).check(z.maxLength(1000)),
  /**
   * A `variable` holder only (agent 0.9.0): `hex(id())` of what the variable held when the
   * inventory was built; Drop workers… acts on the name only while it still holds
   * that object.
   */
  valueId: z.optional(valueId)
});

const children = z.object({
  visible: z.boolean(),
  source: z.nullable(z.enum(['proc', 'psutil'])),
  reason: z.nullable(shortText),
  truncated: z.boolean(),
  processes: z.array(childProcess).check(z.maxLength(1000)),
  holders: z.array(workerHolder).check(z.maxLength(1000)),
  orphans: z.optional(z.array(childProcess).check(z.maxLength(1000)))
});

const ownerHolding = z.object({
  path: shortText,
  kind: z.enum(['model', 'optimizer', 'tensor']),
  /** Only for `model`: the listed model's id. */
  id: z.optional(z.string().check(z.maxLength(64))),
  className: shortText,
  /** Only for `model`: its parameter elements. */
  parameters: z.optional(count),
  bytes: bytesPerDevice,
  /** Only for `model`: its gradients' bytes (part of `bytes`). */
  grads: z.optional(bytesPerDevice)
});

const ownerObject = z.object({
  name: shortText,
  className: shortText,
  holds: z.array(ownerHolding).check(z.maxLength(1000))
});

const keptErrorFrame = z.object({
  name: shortText,
  local: shortText,
  bytes: bytesPerDevice
});

const keptError = z.object({
  name: shortText,
  path: shortText,
  type: shortText,
  frames: z.array(keptErrorFrame).check(z.maxLength(100)),
  bytes: bytesPerDevice,
  tensors: count,
  valueId: z.optional(valueId)
});

const strandedOptimizer = z.object({
  name: shortText,
  className: shortText,
  parameters: count,
  orphaned: count,
  bytes: bytesPerDevice,
  parts: z.object({
    parameters: bytesPerDevice,
    gradients: bytesPerDevice,
    state: bytesPerDevice
  }),
  referencedBy: z.array(shortText).check(z.maxLength(100)),
  valueId: z.optional(valueId)
});

/**
 * One origin of live CUDA memory: the blocks allocated from one source line.
 * `kind` "cell": `cell` is the execution count of the cell whose code made
 * them (`line` 1-based in it; `via` the cell that ran that code, when
 * another); "other": no notebook cell on the stack (`file`, `line`, `name`).
 */
const provenanceGroup = z.object({
  device: count,
  kind: z.enum(['cell', 'other']),
  cell: z.nullable(count),
  /** The notebook cell's id that ran as `cell` (pre_run_cell's cell_id), when known. */
  cellId: z.optional(z.nullable(shortText)),
  /** Other execution counts that ran the very same cell text (one file for all). */
  sameCode: z.optional(z.nullable(z.array(count).check(z.maxLength(100)))),
  line: z.nullable(count),
  file: z.nullable(shortText),
  name: shortText,
  via: z.nullable(z.object({ cell: count, line: z.nullable(count) })),
  text: z.nullable(shortText),
  bytes,
  blocks: count
});

/**
 * Live CUDA memory by origin (agent 0.14.0; present only while the browser
 * asks for it, `configure.provenance`). Bytes are the allocator's block
 * sizes, as `torch.cuda.memory_allocated()` counts them; `since` is the first
 * cell run while recording (earlier blocks are `untraced`); `reason` says why
 * nothing is recorded: "torch" not imported, "cuda" not used yet,
 * "unsupported" by this torch (`error`); `costMs` is this read's cost.
 */
const provenance = z.object({
  recording: z.boolean(),
  since: z.nullable(count),
  reason: z.nullable(z.enum(['torch', 'cuda', 'unsupported'])),
  error: z.optional(shortText),
  /** The user's code started the recording: read, never changed by the agent. */
  byUser: z.optional(z.boolean()),
  /**
   * Torch records no more (agent 0.15.0): the user's code turned recording
   * off. The live blocks' stacks are still read; later blocks are untraced,
   * and the agent does not record again until the setting goes off and on.
   */
  stopped: z.optional(z.boolean()),
  /** The last cell run when `stopped` was seen (execution count), or null. */
  stoppedIn: z.optional(z.nullable(count)),
  groups: z.optional(z.array(provenanceGroup).check(z.maxLength(1000))),
  liveBytes: z.optional(bytes),
  liveBlocks: z.optional(count),
  read: z.optional(count),
  skipped: z.optional(count),
  skippedBytes: z.optional(bytes),
  untracedBytes: z.optional(bytes),
  untracedBlocks: z.optional(count),
  truncated: z.optional(count),
  costMs: z.optional(z.number().check(z.minimum(0)))
});

const inventory = z.object({
  ...envelope,
  type: z.literal('inventory'),
  t: z.number().check(z.minimum(0)),
  seq: count,
  executionCount: z.nullable(count),
  durationMs: z.number().check(z.minimum(0)),
  skipped: z.boolean(),
  torchImported: z.boolean(),
  cudaInitialized: z.boolean(),
  truncated: z.boolean(),
  models: z.array(modelInfo).check(z.maxLength(10_000)),
  lastError: z.nullable(lastError),
  roots: z.array(rootBytes).check(z.maxLength(10_000)),
  unattributed: bytesPerDevice,
  tensors: z.array(tensorInfo).check(z.maxLength(1000)),
  graphs: z.array(graphHolder).check(z.maxLength(1000)),
  allocator: z.nullable(allocator),
  children,
  owners: z.array(ownerObject).check(z.maxLength(1000)),
  /** Caught exceptions kept in user variables (agent 0.10.0; absent before). */
  keptErrors: z.optional(z.array(keptError).check(z.maxLength(1000))),
  /** Optimizers whose model is gone (agent 0.10.0; absent before). */
  optimizers: z.optional(z.array(strandedOptimizer).check(z.maxLength(1000))),
  limits,
  /**
   * Objects the inventory left out because reading them would run the
   * user's code or failed (agent 0.8.0; absent from older agents).
   */
  unread: z.optional(
    z.object({
      objects: count,
      reasons: z.record(z.string().check(z.maxLength(200)), count)
    })
  ),
  /**
   * A namespace of more than 2,000 names (agent 0.11.0; absent below that
   * and from older agents): its size, the names read for this inventory,
   * the user variables that can hold something and the cells within which
   * every name is read again.
   */
  namespace: z.optional(
    z.object({ names: count, read: count, roots: count, cycle: count })
  ),
  provenance: z.optional(provenance)
});

const beforeAfter = z.object({ before: bytes, after: bytes });

const cleaned = z.object({
  ...envelope,
  type: z.literal('cleaned'),
  executionCount: z.nullable(count),
  models: z.object({ before: count, after: count }),
  freed: bytesPerDevice,
  allocated: z.nullable(z.record(deviceName, beforeAfter)),
  reserved: z.nullable(z.record(deviceName, beforeAfter))
});

const oom = z.object({
  ...envelope,
  type: z.literal('oom'),
  executionCount: z.nullable(count),
  errorType: shortText,
  message: shortText,
  device: z.nullable(deviceName),
  requested: nullableBytes,
  free: nullableBytes,
  total: nullableBytes,
  process: nullableBytes,
  processes: z
    .array(z.object({ pid: count, used: nullableBytes }))
    .check(z.maxLength(1000)),
  allocated: nullableBytes,
  reserved: nullableBytes,
  stale: z
    .array(
      z.object({
        id: z.string().check(z.maxLength(64)),
        label: shortText,
        bytes
      })
    )
    .check(z.maxLength(10_000)),
  traceback: bytes,
  graphs: bytes,
  torch: z.nullable(z.string().check(z.maxLength(200))),
  ultralytics: z.nullable(z.string().check(z.maxLength(200)))
});

/** The bytes of a process's name and user: `/proc/<pid>/comm` is 15, psutil's names are longer. */
const processText = z.nullable(z.string().check(z.maxLength(256)));

const gpuProcess = z.object({
  pid: count,
  kind: z.enum(['compute', 'graphics', 'both']),
  used: nullableBytes,
  name: processText,
  /**
   * The agent shortens it to 200 characters (Python's, i.e. code points):
   * up to 400 UTF-16 units here, and some room for an ellipsis.
   */
  cmdline: z.nullable(z.string().check(z.maxLength(512))),
  user: processText,
  self: z.boolean()
});

const gpuProcessDevice = z.object({
  index: count,
  processes: z
    .array(gpuProcess)
    .check(z.maxLength(GPU_PROCESSES_MAX_PER_DEVICE))
});

const gpuProcesses = z.object({
  ...envelope,
  type: z.literal('gpuProcesses'),
  t: z.number().check(z.minimum(0)),
  pid: count,
  namespace: z.enum(['host', 'container', 'unknown']),
  devices: z
    .array(gpuProcessDevice)
    .check(z.maxLength(GPU_PROCESSES_MAX_DEVICES))
});

const agentError = z.object({
  ...envelope,
  type: z.literal('error'),
  where: z.enum(['install', 'sample', 'nvml', 'inventory', 'comm', 'clean']),
  message: shortText
});

const kernelMessage = z.discriminatedUnion('type', [
  hello,
  sample,
  inventory,
  cleaned,
  oom,
  gpuProcesses,
  agentError
]);

/** `hello`: sent once per comm, describes the kernel and its devices. */
export type IHello = z.infer<typeof hello>;
/**
 * One limit of the kernel's environment (`hello.limits`, `inventory.limits`;
 * absent from older agents): `area` is what the agent does with less
 * (`holders`: names only the holders it can read from an IPython of another
 * layout; `models`: torch without registration hooks, models found by a
 * bounded heap scan; `owners`: a library's owner attributes not found,
 * generic owner search), `library` and `version` the library that causes
 * it (`"IPython"`, `"7.34.0"`).
 */
export type ILimit = z.infer<typeof limit>;
/**
 * One CUDA device as NVML names it: `index` is the kernel's CUDA index
 * (`cuda:<index>`, CUDA_VISIBLE_DEVICES applied), `nvmlIndex` the number
 * nvidia-smi gives it; `total` in bytes.
 */
export type IDeviceInfo = z.infer<typeof deviceInfo>;
/**
 * `sample`: device memory figures pushed by the agent's sampler thread: every
 * `sampleIntervalMs` while a user cell runs; between cells the first one after
 * the cell and then only when this kernel's own figures changed (its VRAM,
 * allocated / reserved, SM share, resident memory by ≥ 1 MiB, child
 * processes), so that an idle kernel sends nothing (agent 0.16.0).
 */
export type ISample = z.infer<typeof sample>;
/**
 * `sample.progress`: the Ultralytics trainer training in the running cell,
 * `epoch` (0-based, the epoch in progress: `BaseTrainer.epoch`) of `epochs`
 * (`BaseTrainer.epochs`). Absent or null when no trainer is known to train.
 */
export type ITrainingProgress = z.infer<typeof trainingProgress>;
/**
 * Figures for one device in a sample, bytes; `null` where not measurable.
 * `used`/`total`/`process` come from NVML, `allocated`/`reserved` from
 * PyTorch's caching allocator. The bands of this kernel's memory:
 * `allocated` (live tensors), `cached` (`reserved − allocated`: free for this
 * kernel, returned by `torch.cuda.empty_cache()`) and `nonTorch`
 * (`process − reserved`: CUDA context, cuBLAS/cuDNN, other allocators; freed
 * only by ending the process). `processHidden`: NVML lists no process with
 * the kernel's pid although torch holds memory (another pid namespace, e.g. a
 * container); `process` and `nonTorch` are then null.
 *
 * `allocatedMin` (optional): the lowest `allocated` the sampler read since
 * the previous sample, this one's own read included; while a cell runs it
 * reads every ~50 ms (± 25 ms, so that the reads fall on random phases of a
 * training step), so this is the floor under the activations' sawtooth.
 * Null where `allocated` is; absent from agents before 0.6.0.
 * `limit` (optional): the caching allocator's cap for this process on the
 * device, `torch.cuda.set_per_process_memory_fraction(f)` → f × the
 * device's total memory as torch knows it; null when no cap is set (fraction
 * 1.0) or CUDA is not initialised; absent from older agents. A cell fails
 * with CUDA out of memory when reserved would pass it.
 * `utilization` (optional): the percent of NVML's last sample period in
 * which a kernel ran on the device (nvidia-smi's GPU-Util, all processes);
 * `processUtilization` (optional): this kernel process's SM share since the
 * previous sample, the mean of NVML's per-process samples (0 when NVML has
 * samples of other processes only). Null where the driver gives none (a MIG
 * instance) or had no sample; absent from agents before 0.13.0.
 */
export type IDeviceSample = z.infer<typeof deviceSample>;
/** `inventory`: live models, what holds them and who holds the bytes, after each cell. */
export type IInventory = z.infer<typeof inventory>;
/**
 * A live top-level `torch.nn.Module` in the kernel. `copied`: made without
 * its constructor (a `copy.deepcopy`, a pickled model loaded): a deliberate
 * copy, never a stacked instance.
 */
export type IModelInfo = z.infer<typeof modelInfo>;
/**
 * What hangs off a model's plain attributes (`trainer.ema.ema`,
 * `trainer.optimizer`): bytes per device not already counted in the model or
 * an earlier part.
 */
export type IPart = z.infer<typeof part>;
/**
 * A root that keeps a model alive: `name` is the root (`model`, `Out[2]`,
 * `last traceback (train_step)`), `path` the way from it to the model
 * (`runs[0].model`), at most 500 characters.
 */
export type IHolder = z.infer<typeof holder>;
/** Kind of root: a user variable, the output cache, the last traceback, or nothing named. */
export type RootKind = IHolder['kind'];
/**
 * Bytes first reached from one root (`bytes`: every storage counted once, in
 * the order variables, output cache, last traceback, then unreachable
 * models). `sole`: bytes per device that no other holder keeps (what deleting
 * the root returns; the output-cache names of one object, `Out[7]`, `_7`,
 * `_`, are one holder); `shared`: bytes it keeps that another holder keeps
 * too, `sharedWith` the names of (at most 8) such holders, variables first.
 * `cells` (output roots only): the execution counts whose `Out` entry is
 * the very object the root names; empty for a hidden copy no longer in `Out`
 * (after `del Out[7]` or `%reset -f out`). The three are absent from agents
 * that do not report them.
 */
export type IRootBytes = z.infer<typeof rootBytes>;

/** Live CUDA memory by origin (`inventory.provenance`, agent 0.14.0). */
export type IProvenance = z.infer<typeof provenance>;

/** One origin of live CUDA memory (`provenance.groups`). */
export type IProvenanceGroup = z.infer<typeof provenanceGroup>;
/** A large tensor (≥ 1 MiB) outside any model; `bytes` of its storage. */
export type ITensorInfo = z.infer<typeof tensorInfo>;
/**
 * A user variable that keeps autograd graphs alive (`losses.append(loss)`);
 * `bytes` per device is an estimate (a lower bound when `truncated`).
 */
export type IGraphHolder = z.infer<typeof graphHolder>;
/**
 * A caught exception kept in a user variable (`err = e`, a list of the
 * errors an out-of-memory retry loop caught): its traceback keeps the
 * frames it passed through and their locals. `path` is the exception's
 * path from the variable `name`; `frames` (largest first) give each frame's
 * function, its largest tensor's path from the frame (`.acts`) and the
 * bytes only that exception reaches through it; `bytes` per device, whole
 * storages, each once (what clearing its frames returns unless another
 * holder keeps them).
 */
export type IKeptError = z.infer<typeof keptError>;
/**
 * An optimizer named by a user variable some of whose parameters belong to
 * no live model (`del model` while `opt` lives): `orphaned` of its
 * `parameters`, and the bytes per device of those parameters, their
 * gradients and their state (`parts`, each storage once). `referencedBy`:
 * the other user variables that keep the optimizer (an LR scheduler, a
 * wrapper, a GradScaler with state for it).
 */
export type IStrandedOptimizer = z.infer<typeof strandedOptimizer>;
/**
 * PyTorch's caching allocator per device (`torch.cuda.memory_stats`), only
 * when CUDA is already initialised; bytes. `releasable` (reserved − active −
 * inactiveSplit) is what `torch.cuda.empty_cache()` returns: segments with
 * no live block; `inactiveSplit` is fragmentation: free blocks of segments
 * that still hold a live tensor, which `empty_cache()` cannot return.
 * `expandableSegments`: `PYTORCH_CUDA_ALLOC_CONF` has
 * `expandable_segments:True` (then fragmentation is mostly returned).
 */
export type IAllocator = z.infer<typeof allocator>;
/** One device of {@link IAllocator}. */
export type IAllocatorDevice = z.infer<typeof allocatorDevice>;
/**
 * The kernel's child processes (DataLoader workers and others), from
 * `/proc` or psutil; `visible: false` (with `reason`) where neither can
 * list them. `rss` in bytes (of a forked worker it counts pages still
 * shared with the kernel); `cuda`: holds a CUDA context (NVML's process
 * list, or `/dev/nvidia-uvm`/`/dev/nvidiaN` open: `cudaSource` "fd",
 * which a fork inherits: null for such a child of a kernel that has them
 * open itself), null when unknown.
 * `orphans`: DataLoader workers of this user whose kernel is gone
 * (reparented to pid 1), e.g. left by a restart while a worker was busy.
 */
export type IChildren = z.infer<typeof children>;
/** One child process of {@link IChildren}. */
export type IChildProcess = z.infer<typeof childProcess>;
/** A loader or iterator that keeps worker processes alive (`pids`). */
export type IWorkerHolder = z.infer<typeof workerHolder>;
/**
 * An owner object: a user variable that is a plain object (a trainer)
 * holding at least one model through its own attributes, with what each
 * attribute holds (`holds`): models, optimizer state, tensors, bytes per
 * device, each storage once per owner.
 */
export type IOwnerObject = z.infer<typeof ownerObject>;
/** One attribute of an owner object and what it holds. */
export type IOwnerHolding = z.infer<typeof ownerHolding>;
/** What the last exception's traceback keeps alive. */
export type ILastError = z.infer<typeof lastError>;
/** `cleaned`: what a clean cell freed. */
export type ICleaned = z.infer<typeof cleaned>;
/**
 * `oom`: a cell failed with CUDA out of memory. Figures in bytes, parsed from
 * torch's message (`requested`, `free`, `total`; else NVML) or measured right
 * after the failure (`process` and `processes` from NVML, `allocated` and
 * `reserved` from torch); `null` where unknown. `torch` and `ultralytics` are
 * the versions imported in the kernel.
 */
export type IOom = z.infer<typeof oom>;
/**
 * `gpuProcesses`: the processes NVML lists on each device the kernel sees,
 * pushed by the agent's sampler thread (at most every 2 s, when the list
 * changed or 10 s passed). `pid` is the kernel's own (as `hello.pid`).
 * `namespace`: `host` when NVML's pids are this OS's pids (they can be
 * joined with the server's kernels), `container` when they are not (the
 * browser then attributes nothing), `unknown` when the agent could not check.
 */
export type IGpuProcesses = z.infer<typeof gpuProcesses>;
/** The processes of one device (CUDA `index`, as in `sample`), largest `used` first, at most 64. */
export type IGpuProcessDevice = z.infer<typeof gpuProcessDevice>;
/**
 * One process on a device: NVML's `usedGpuMemory` in bytes (`used`, null
 * when the driver does not report it), `kind` (compute, graphics or both),
 * its name, command line (at most 200 characters) and owner from `/proc` or
 * psutil (null when unreadable); `self` for the kernel itself.
 */
export type IGpuProcess = z.infer<typeof gpuProcess>;
/** `error`: an error inside the agent (never shown in a user's cell). */
export type IAgentError = z.infer<typeof agentError>;
/** Any valid kernel → browser message. */
export type KernelMessage = z.infer<typeof kernelMessage>;
/** Model family, used by the stacking rule. */
export type ModelFamily = IModelInfo['family'];

/** Result of {@link parseKernelMessage}. */
export type ParseResult =
  { ok: true; message: KernelMessage } | { ok: false; reason: string };

/**
 * Validate a kernel → browser comm message.
 *
 * @param data - the `content.data` of a `comm_msg` (any JSON value).
 * @returns the typed message, or the reason it was rejected. Never throws.
 */
export function parseKernelMessage(data: unknown): ParseResult {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return { ok: false, reason: 'not an object' };
  }
  const protocol = (data as { protocol?: unknown }).protocol;
  if (protocol !== PROTOCOL_VERSION) {
    return {
      ok: false,
      reason: `unsupported protocol version ${JSON.stringify(protocol) ?? 'undefined'}`
    };
  }
  const result = kernelMessage.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : 'message';
    return { ok: false, reason: `${where}: ${issue?.message ?? 'invalid'}` };
  }
  return { ok: true, message: result.data };
}

/** Browser → kernel: tune the agent (also the data of `comm_open`). */
export interface IConfigureMessage {
  protocol: typeof PROTOCOL_VERSION;
  type: 'configure';
  /** Sampler period in milliseconds, at least 250. */
  sampleIntervalMs: number;
  /**
   * Record which cell and line allocated each live CUDA block (agent 0.14.0;
   * an older agent ignores it): inventories then carry `provenance`.
   */
  provenance?: boolean;
}

/** Browser → kernel: ask for an inventory now. */
export interface IInventoryRequest {
  protocol: typeof PROTOCOL_VERSION;
  type: 'inventory';
}

/**
 * Browser → kernel: a user asked for fresh figures (agent 0.16.0): the agent
 * answers with a `sample` and, with NVML, a `gpuProcesses`. Sent only on a
 * user's action (opening the gauge's popup or the panel) where the server
 * cannot read the kernel's GPU: every message to a kernel counts as its
 * activity for idle cullers.
 */
export interface ISampleRequest {
  protocol: typeof PROTOCOL_VERSION;
  type: 'sample';
}

/** Any browser → kernel message. */
export type BrowserMessage =
  IConfigureMessage | IInventoryRequest | ISampleRequest;
