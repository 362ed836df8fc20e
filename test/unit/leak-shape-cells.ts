/**
 * Synthetic training cells for the leak trend: what PyTorch's allocated
 * memory does during a cell, and the samples the agent's sampler would take
 * of it. Every shape is a floor (what stays allocated between training
 * steps: weights, optimizer state, kept tensors) plus a sawtooth (the
 * activations each step allocates in its forward pass and frees in its
 * backward pass), sampled the way the agent samples:
 *
 * - one `sample` every `intervalS` seconds (its `allocated` is the value at
 *   that instant, a random phase of the step);
 * - with `subReads` (agents after 0.5.0): while the cell runs, the sampler also
 *   reads allocated every 50 ms ± 25 ms and reports the lowest read since
 *   the previous sample as `allocatedMin`.
 *
 * Randomness comes from a seeded generator: the tests never flake.
 */
import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { GpuKernelModel } from '../../src/model';
import { GpuNotifier } from '../../src/notifications';
import type { ISample } from '../../src/protocol';
import { c01Inventory, OneModelMonitor } from './fixtures';

export const MiB = 2 ** 20;
export const GiB = 2 ** 30;
/** An H200 as NVML reports it (143771 MiB). */
export const H200_TOTAL = 143_771 * MiB;
/** The CUDA context and libraries of the kernel process (measured on the H200). */
const CONTEXT = 620 * MiB;
/** Sample times start here (seconds since the epoch). */
export const T0 = 1_764_500_000;

/** Deterministic uniform numbers in [0, 1) (an LCG). */
export function uniform(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** The activations of a training loop: a triangle per step (up in the forward pass, down in the backward pass). */
export interface ISawtooth {
  /** Peak activations above the floor (bytes) at time `t` (s); 0 = no training at that time. */
  amplitude: (t: number) => number;
  /** Mean step period (s), e.g. 0.01–0.1. */
  period: number;
  /** Relative jitter of each step's duration (0 = a perfectly regular loop, which aliases). */
  jitter: number;
  /**
   * Fraction of each step spent at the floor (default {@link DWELL}): the
   * loop waits there for the GPU at its `loss.item()` or for the next batch.
   * 0 is the harshest sawtooth: a triangle that never rests on the floor.
   */
  dwell?: number;
}

/**
 * Fraction of a training step at the floor in the shapes: half. Measured on
 * the H200 (bench/leak_reads.h200.json): a CNN with AdamW and a
 * `loss.item()` per step spent 80% of each 22.6 ms step within 5% of the
 * step's amplitude above its floor.
 */
export const DWELL = 0.5;

/** A cell's allocated memory: its floor and its sawtooth. */
export interface IShape {
  /** Name, for test titles. */
  name: string;
  /** Duration of the cell (s). */
  duration: number;
  /** The floor (bytes) at time `t` (s since the cell's start). */
  floor: (t: number) => number;
  /** The training steps' activations. */
  sawtooth: ISawtooth;
  /** Allocator cap (`limit`, bytes) or null. */
  limit?: number | null;
}

/** How the agent samples a shape. */
export interface ISampling {
  /** Sample interval (s). */
  intervalS: number;
  /** Whether samples carry `allocatedMin` (the sampler's reads every ~50 ms while busy). */
  subReads: boolean;
  /** Seed of the sample phases and the steps' jitter. */
  seed: number;
}

/** Allocated memory at any time of a shape (bytes), with a seeded step schedule. */
export function allocatedAt(
  shape: IShape,
  seed: number
): (t: number) => number {
  const random = uniform(seed * 7919 + 17);
  const { period, jitter } = shape.sawtooth;
  // Step boundaries, each step `period` ± jitter long.
  const starts: number[] = [];
  for (let t = 0; t < shape.duration + 1;) {
    starts.push(t);
    t += period * (1 + jitter * (2 * random() - 1));
  }
  return (t: number) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const start = starts[lo];
    const length = (starts[lo + 1] ?? start + period) - start;
    const dwell = shape.sawtooth.dwell ?? DWELL;
    const phase = Math.min(1, Math.max(0, (t - start) / length));
    // At the floor first, then the forward pass (a third of the rest) and the backward pass.
    const active = phase < dwell ? 0 : (phase - dwell) / (1 - dwell);
    const shapeOf = active < 1 / 3 ? active * 3 : (1 - active) * 1.5;
    return Math.round(shape.floor(t) + shape.sawtooth.amplitude(t) * shapeOf);
  };
}

/**
 * The busy samples of one cell (the cell starts at `T0`), as the agent would
 * send them; reserved follows the caching allocator (it keeps its peak),
 * used = reserved + the CUDA context.
 */
export function sampleShape(shape: IShape, sampling: ISampling): ISample[] {
  const value = allocatedAt(shape, sampling.seed);
  const random = uniform(sampling.seed);
  const samples: ISample[] = [];
  let reserved = 0;
  let lastTick = -Infinity;
  let seq = 0;
  for (
    let t = 0.001 + random() * 0.01;
    t <= shape.duration;
    t += sampling.intervalS + random() * 0.004
  ) {
    let low = value(t);
    if (sampling.subReads) {
      // Reads every 50 ms ± 25 ms since the previous sample.
      for (
        let r = Math.max(0, lastTick) + 0.025 + random() * 0.05;
        r < t;
        r += 0.025 + random() * 0.05
      ) {
        const read = value(r);
        low = Math.min(low, read);
        reserved = Math.max(reserved, read);
      }
    }
    const allocated = value(t);
    reserved = Math.max(reserved, allocated);
    lastTick = t;
    samples.push(
      deviceSample(T0 + t, ++seq, true, allocated, reserved, {
        allocatedMin: sampling.subReads ? low : undefined,
        limit: shape.limit ?? null
      })
    );
  }
  return samples;
}

/** One busy or idle sample of device 0 (an H200). */
export function deviceSample(
  t: number,
  seq: number,
  busy: boolean,
  allocated: number,
  reserved: number,
  extra: { allocatedMin?: number; limit?: number | null } = {}
): ISample {
  const used = reserved + CONTEXT;
  return {
    protocol: 2,
    type: 'sample',
    t,
    seq,
    busy,
    devices: [
      {
        index: 0,
        used,
        total: H200_TOTAL,
        process: used,
        allocated,
        reserved,
        cached: reserved - allocated,
        nonTorch: CONTEXT,
        processHidden: false,
        ...(extra.allocatedMin !== undefined
          ? { allocatedMin: extra.allocatedMin }
          : {}),
        ...(extra.limit !== undefined ? { limit: extra.limit } : {})
      }
    ]
  };
}

// ---- the shapes

/** Sawtooth of a training loop from `from` (s) on, `amplitude` bytes, `period` s. */
function training(
  amplitude: number,
  period: number,
  from = 0.5,
  jitter = 0.05
): ISawtooth {
  return {
    amplitude: t => (t >= from ? amplitude : 0),
    period,
    jitter
  };
}

const WEIGHTS = 1.5 * GiB; // model, its EMA and their gradients' first allocation

/**
 * A healthy training: the model and its EMA load at 0.3 s, the optimizer
 * state appears at the first step (0.6 s), then a sawtooth of `amplitude`
 * around a flat floor (a few MiB of per-step noise: loss items, metrics).
 */
export function healthyTraining(
  period: number,
  options: {
    amplitude?: number;
    jitter?: number;
    duration?: number;
    dwell?: number;
  } = {}
): IShape {
  const noise = uniform(5);
  const wiggle = Array.from({ length: 2000 }, () => noise() * 4 * MiB);
  return {
    name: `healthy training, ${period * 1000} ms steps`,
    duration: options.duration ?? 120,
    floor: t =>
      (t >= 0.3 ? WEIGHTS : 0) +
      (t >= 0.6 ? 0.5 * GiB : 0) +
      wiggle[Math.floor(t * 10) % wiggle.length],
    sawtooth: {
      ...training(
        options.amplitude ?? 6 * GiB,
        period,
        0.6,
        options.jitter ?? 0.05
      ),
      dwell: options.dwell
    }
  };
}

/** A model load (one step of `bytes` at `at` s), then an inference loop. */
export function modelLoad(bytes = 5 * GiB, at = 2): IShape {
  return {
    name: 'model load',
    duration: 90,
    floor: t => (t >= at ? bytes : 0),
    sawtooth: training(0.8 * GiB, 0.04, at + 0.5)
  };
}

/**
 * Warm-up: the floor rises over the first `seconds` (cuDNN and cuBLAS
 * workspaces, the optimizer state and AMP's scaler appearing step by step),
 * then stays flat.
 */
export function allocatorWarmUp(seconds = 4, rise = 3 * GiB): IShape {
  return {
    name: `allocator warm-up over ${seconds} s`,
    duration: 90,
    floor: t => WEIGHTS + rise * Math.min(1, Math.max(0, t - 0.3) / seconds),
    sawtooth: training(4 * GiB, 0.05, 0.3)
  };
}

/**
 * Ultralytics' first-epoch batch halving (trainer `_oom_retries`): the first
 * iterations at the AutoBatch size climb (optimizer state, AMP, growing
 * activations) until CUDA runs out of memory at `oomAt`; the trainer frees
 * everything, rebuilds its loader (2 s, no steps) and trains on at half the
 * batch: a flat sawtooth. `retries` OOMs in a row (at most 3).
 */
export function batchHalving(retries = 1): IShape {
  const climb = 3; // s of each first-epoch attempt before its OOM
  const rebuild = 2;
  const attempt = climb + rebuild;
  const start = 1;
  const end = start + retries * attempt; // training at the final batch from here
  return {
    name: `Ultralytics batch halving (${retries} OOM${retries > 1 ? 's' : ''})`,
    duration: 90,
    floor: t => {
      if (t < 0.3) {
        return 0;
      }
      if (t < start || t >= end) {
        return WEIGHTS + (t >= end ? 0.5 * GiB : 0);
      }
      const into = (t - start) % attempt;
      // the attempt's floor climbs in steps (optimizer state, AMP, cuDNN), then the OOM frees it
      return into < climb
        ? WEIGHTS + Math.floor(into * 4) * 2 * GiB
        : WEIGHTS + 0.5 * GiB;
    },
    sawtooth: {
      amplitude: t => {
        if (t < start) {
          return 0;
        }
        if (t >= end) {
          return 50 * GiB; // half the batch
        }
        const into = (t - start) % attempt;
        // growing activations towards the device's total, nothing while rebuilding
        return into < climb ? (60 + 25 * into) * GiB : 0;
      },
      period: 0.1,
      jitter: 0.05
    }
  };
}

/**
 * Ultralytics AutoBatch (`check_train_batch_size`): after the model loads,
 * one forward and backward pass per batch size 1, 2, 4, 8, 16 (spikes that
 * grow and return to the baseline, longer for larger batches), then
 * `empty_cache()` and training at the chosen batch.
 */
export function autoBatch(): IShape {
  const spikes = [1, 2, 4, 8, 16].map((b, i) => ({
    from: 1 + i * 0.9,
    to: 1 + i * 0.9 + 0.1 + 0.05 * b,
    bytes: b * 1.6 * GiB
  }));
  return {
    name: 'Ultralytics AutoBatch probing',
    duration: 90,
    floor: t => {
      if (t < 0.5) {
        return 0;
      }
      const spike = spikes.find(s => t >= s.from && t < s.to);
      return WEIGHTS + (spike ? spike.bytes : 0) + (t >= 6 ? 0.5 * GiB : 0);
    },
    sawtooth: training(20 * GiB, 0.06, 6)
  };
}

/**
 * A stairs leak: epochs of `epoch` s (training, then a validation of the
 * last fifth), each validation keeps its losses as tensors with their graph
 * (`val_losses.append(loss)`): `step` bytes more at the end of every epoch.
 * Epoch 1 starts at 0.5 s (after the model load).
 */
export function stairsLeak(epoch: number, step = 490 * MiB): IShape {
  const start = 0.5;
  return {
    name: `stairs leak, ${epoch} s epochs`,
    duration: 60,
    floor: t =>
      t < 0.3
        ? 0
        : WEIGHTS + Math.max(0, Math.floor((t - start) / epoch)) * step,
    sawtooth: {
      amplitude: t => {
        if (t < start) {
          return 0;
        }
        const into = ((t - start) % epoch) / epoch;
        return into < 0.8 ? 4 * GiB : 1.2 * GiB; // validation: smaller activations
      },
      period: 0.05,
      jitter: 0.05
    }
  };
}

/** Time of the end of epoch `n` (1-based) of {@link stairsLeak}. */
export function epochEnd(epoch: number, n: number): number {
  return 0.5 + n * epoch;
}

/** A smooth ramp leak: every step keeps its graph (`losses.append(loss)`), `perMinute` bytes a minute from 0.5 s. */
export function rampLeak(perMinute: number): IShape {
  return {
    name: `ramp leak, ${(perMinute / GiB).toFixed(1)} GiB/min`,
    duration: 60,
    floor: t =>
      t < 0.3 ? 0 : WEIGHTS + (Math.max(0, t - 0.5) * perMinute) / 60,
    sawtooth: training(4 * GiB, 0.05)
  };
}

// ---- feeding a shape to the product: the model and the real toast rules

/** What the leak toast did while a cell's samples arrived. */
export interface IToastTimeline {
  /** Seconds since the cell's start of the first leak toast, or null. */
  first: number | null;
  /** Its text. */
  message: string | null;
  /** Its buttons' labels. */
  actions: string[];
  /** Seconds with a leak toast on screen (the samples' intervals while one was). */
  shownFor: number;
}

/**
 * Run a shape through a kernel model and the real notifier, sample after
 * sample, the way the connection applies the agent's messages: cell [11]'s
 * inventory first (so the running cell is [12]), then the busy samples.
 */
export function toastTimeline(
  shape: IShape,
  sampling: ISampling
): IToastTimeline {
  const model = new GpuKernelModel({ kernelId: `k-${shape.name}` });
  const notifier = new GpuNotifier({
    monitor: new OneModelMonitor(model, {
      warnOnStackedModels: false,
      warnOnFindings: false,
      warnOnGraphHolders: false
    }),
    commands: new CommandRegistry(),
    trans: nullTranslator.load('jupyterlab_gpu_hygiene')
  });
  model.apply(deviceSample(T0 - 2, 0, false, 0, 0));
  model.apply({
    ...c01Inventory(),
    models: [],
    executionCount: 11,
    t: T0 - 1
  });
  const out: IToastTimeline = {
    first: null,
    message: null,
    actions: [],
    shownFor: 0
  };
  let previous = T0;
  for (const sample of sampleShape(shape, sampling)) {
    model.apply(sample);
    const toast = Notification.manager.notifications.find(
      n => n.type === 'warning'
    );
    if (toast) {
      out.shownFor += sample.t - previous;
      if (out.first === null) {
        out.first = sample.t - T0;
        out.message = toast.message;
        out.actions = (toast.options.actions ?? []).map(a => a.label);
      }
    }
    previous = sample.t;
  }
  notifier.dispose();
  Notification.dismiss();
  model.dispose();
  return out;
}
