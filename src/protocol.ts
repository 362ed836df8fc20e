/**
 * Comm protocol between the browser and the kernel-side agent, version 1.
 *
 * The wire format is documented in `docs/protocol.md`. Every kernel message is
 * validated here before anything else reads it: a message that does not match
 * is dropped (and counted by the connection), never thrown into the UI.
 *
 * Units: bytes (integers) for memory, seconds since the epoch for `t`,
 * milliseconds for durations. `null` means "not measurable in this kernel".
 */
import * as z from 'zod/mini';

/** Version carried as `protocol` in every message. */
export const PROTOCOL_VERSION = 1;

/** Comm target registered by the agent in the kernel. */
export const COMM_TARGET = 'jupyterlab_gpu_hygiene.v1';

/** Marker comment that identifies a clean cell (the agent reports `cleaned` after it). */
export const CLEAN_MARKER = '# gpu-hygiene: clear_gpu';

const bytes = z.int().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER));
const nullableBytes = z.nullable(bytes);
const count = bytes;
const shortText = z.string().check(z.maxLength(10_000));
/** Bytes per device name (`"cpu"`, `"cuda:0"`, ...). */
const bytesPerDevice = z.record(z.string().check(z.maxLength(64)), bytes);
const envelope = { protocol: z.literal(PROTOCOL_VERSION) };

const deviceInfo = z.object({
  index: count,
  name: shortText,
  total: bytes,
  uuid: z.nullable(shortText)
});

const hello = z.object({
  ...envelope,
  type: z.literal('hello'),
  agentVersion: shortText,
  python: shortText,
  pid: count,
  torch: z.nullable(shortText),
  nvml: z.boolean(),
  nvmlError: z.nullable(shortText),
  devices: z.array(deviceInfo).check(z.maxLength(64))
});

const deviceSample = z.object({
  index: count,
  used: nullableBytes,
  total: nullableBytes,
  process: nullableBytes,
  allocated: nullableBytes,
  reserved: nullableBytes
});

const sample = z.object({
  ...envelope,
  type: z.literal('sample'),
  t: z.number().check(z.minimum(0)),
  seq: count,
  busy: z.boolean(),
  devices: z.array(deviceSample).check(z.maxLength(64))
});

const holder = z.object({
  kind: z.enum(['variable', 'output', 'traceback', 'hidden']),
  name: shortText
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
  holders: z.array(holder).check(z.maxLength(1000)),
  stale: z.boolean()
});

const lastError = z.object({
  type: shortText,
  message: shortText,
  frames: z
    .array(z.object({ name: shortText, bytes: bytesPerDevice, tensors: count }))
    .check(z.maxLength(1000)),
  bytes: bytesPerDevice
});

const inventory = z.object({
  ...envelope,
  type: z.literal('inventory'),
  t: z.number().check(z.minimum(0)),
  seq: count,
  executionCount: z.nullable(count),
  durationMs: z.number().check(z.minimum(0)),
  torchImported: z.boolean(),
  cudaInitialized: z.boolean(),
  truncated: z.boolean(),
  models: z.array(modelInfo).check(z.maxLength(10_000)),
  lastError: z.nullable(lastError)
});

const beforeAfter = z.object({ before: bytes, after: bytes });

const cleaned = z.object({
  ...envelope,
  type: z.literal('cleaned'),
  executionCount: z.nullable(count),
  models: z.object({ before: count, after: count }),
  freed: bytesPerDevice,
  allocated: z.nullable(
    z.record(z.string().check(z.maxLength(64)), beforeAfter)
  ),
  reserved: z.nullable(z.record(z.string().check(z.maxLength(64)), beforeAfter))
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
  agentError
]);

/** `hello`: sent once per comm, describes the kernel and its devices. */
export type IHello = z.infer<typeof hello>;
/** One CUDA device as NVML names it; `total` in bytes. */
export type IDeviceInfo = z.infer<typeof deviceInfo>;
/** `sample`: device memory figures pushed by the agent's sampler thread. */
export type ISample = z.infer<typeof sample>;
/** Figures for one device in a sample, bytes; `null` where not measurable. */
export type IDeviceSample = z.infer<typeof deviceSample>;
/** `inventory`: live models and what holds them, after each cell. */
export type IInventory = z.infer<typeof inventory>;
/** A live top-level `torch.nn.Module` in the kernel. */
export type IModelInfo = z.infer<typeof modelInfo>;
/** A root that keeps a model alive. */
export type IHolder = z.infer<typeof holder>;
/** What the last exception's traceback keeps alive. */
export type ILastError = z.infer<typeof lastError>;
/** `cleaned`: what a clean cell freed. */
export type ICleaned = z.infer<typeof cleaned>;
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
}

/** Browser → kernel: ask for an inventory now. */
export interface IInventoryRequest {
  protocol: typeof PROTOCOL_VERSION;
  type: 'inventory';
}

/** Any browser → kernel message. */
export type BrowserMessage = IConfigureMessage | IInventoryRequest;
