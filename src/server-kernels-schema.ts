/**
 * The validation of `GET {baseUrl}gpu-hygiene/kernels`'s answer (any JSON
 * value) against the shape of {@link IServerKernelsAnswer}. A chunk of its
 * own: `fetchServerKernels` imports it with the first answer, so zod is not
 * loaded at JupyterLab's start.
 */
import * as z from 'zod/mini';
import type {
  IServerDevice,
  IServerKernel,
  IServerKernelsAnswer,
  IServerSession,
  ServerKernelsParse
} from './server-kernel-types';

const text = (max: number) => z.string().check(z.maxLength(max));
const count = z.int().check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER));

const session = z.object({
  id: text(256),
  path: text(4096),
  name: text(4096),
  type: text(64)
});

const serverKernel = z.object({
  id: text(256),
  name: text(256),
  pid: z.nullable(count),
  executionState: text(64),
  lastActivity: z.nullable(text(64)),
  connections: count,
  sessions: z.array(session).check(z.maxLength(1000))
});

const nonNegative = z.number().check(z.minimum(0), z.maximum(1e9));

const serverDevice = z.object({
  uuid: text(256),
  index: text(64),
  mig: z.boolean(),
  total: z.nullable(count),
  used: z.nullable(count),
  utilization: z.nullable(z.number().check(z.minimum(0), z.maximum(100))),
  processes: z
    .array(z.object({ pid: count, used: z.nullable(count) }))
    .check(z.maxLength(1000))
});

const answer = z.object({
  kernels: z.array(serverKernel).check(z.maxLength(10_000)),
  gateway: z.boolean(),
  idleHolding: z.optional(z.object({ minutes: nonNegative, mib: nonNegative })),
  devices: z.optional(
    z.object({
      t: z.number().check(z.minimum(0)),
      error: z.nullable(text(1000)),
      devices: z.array(serverDevice).check(z.maxLength(64))
    })
  )
});

// The schema and the interfaces say the same shape (checked by the compiler both ways).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const sameSession: Same<z.infer<typeof session>, IServerSession> = true;
const sameKernel: Same<z.infer<typeof serverKernel>, IServerKernel> = true;
const sameAnswer: Same<z.infer<typeof answer>, IServerKernelsAnswer> = true;
const sameDevice: Same<z.infer<typeof serverDevice>, IServerDevice> = true;
void [sameSession, sameKernel, sameAnswer, sameDevice];

/**
 * Validate the endpoint's answer (any JSON value). Unknown fields are
 * dropped; strings and arrays are bounded. Never throws.
 */
export function parseServerKernels(data: unknown): ServerKernelsParse {
  const result = answer.safeParse(data);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : 'answer';
    return { ok: false, reason: `${where}: ${issue?.message ?? 'invalid'}` };
  }
  return { ok: true, answer: result.data };
}
