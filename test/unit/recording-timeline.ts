/**
 * The leak trend's timeline of a recording (issue 15): the recorded
 * kernel → browser messages ("out" lines of a `gpu-hygiene-recording`, see
 * /work/issue15-interfaces.md) are validated (`parseKernelMessage`) and
 * applied to a `GpuKernelModel` in their order, and after each one the
 * browser's own `findLeak` and `projectFull` run, as the toast rule runs
 * them. Per user cell: when the first rising verdict came (seconds since the
 * cell's start, and epochs where the samples carry `progress` or the
 * recording marks epochs), what it projected, and when the cell really
 * ended or ran out of memory.
 */
import { findLeak } from '../../src/analysis/memory/leak';
import { projectFull } from '../../src/analysis/memory/projection';
import { GpuKernelModel } from '../../src/model';
import { parseKernelMessage } from '../../src/protocol';
import { DEFAULT_SETTINGS, IGpuSettings } from '../../src/tokens';

/** The recording's first line. */
export interface IRecordingHeader {
  format: 'gpu-hygiene-recording';
  version: number;
  scenario: string;
  description?: string;
  t0?: number;
  env?: Record<string, unknown>;
  /** Optional: `healthy` or `leak`, what the scenario expects. */
  expect?: string;
}

/** One line after the header. */
export type RecordingEvent =
  | { at: number; dir: 'out' | 'in'; data: unknown }
  | {
      at: number;
      event: 'execute';
      phase: 'start' | 'end';
      cell: number;
      executionCount?: number;
      status?: 'ok' | 'error';
      error?: string;
      code?: string;
    }
  | { at: number; event: 'mark'; name: string; [key: string]: unknown };

/** A parsed recording. */
export interface IRecording {
  header: IRecordingHeader;
  events: RecordingEvent[];
}

/** Parse a recording's JSON lines; throws on a missing or foreign header. */
export function parseRecording(text: string): IRecording {
  const lines = text.split('\n').filter(line => line.trim());
  if (!lines.length) {
    throw new Error('empty recording');
  }
  const header = JSON.parse(lines[0]) as IRecordingHeader;
  if (header.format !== 'gpu-hygiene-recording') {
    throw new Error(`not a gpu-hygiene recording: ${lines[0].slice(0, 80)}`);
  }
  return {
    header,
    events: lines.slice(1).map(line => JSON.parse(line) as RecordingEvent)
  };
}

/**
 * What the recorded scenarios (test/recordings/scenarios/) show inside a
 * cell: `leak` where a cell's allocated memory climbs (a loop that keeps its
 * held-out losses with their graphs), `healthy` where it must not toast
 * (the same loop with `.item()`, a real YOLO training, stacked models, one
 * CUDA out-of-memory allocation).
 */
export const SCENARIOS: Readonly<Record<string, 'healthy' | 'leak'>> = {
  'leak-append-loss': 'leak',
  'leak-append-loss-capped': 'leak',
  'leak-fixed-item': 'healthy',
  'yolo-train': 'healthy',
  'stacked-yolo': 'healthy',
  'cuda-oom': 'healthy'
};

/**
 * What a recording is expected to show: its header's `expect`, else the
 * known scenario's ({@link SCENARIOS}), else "healthy" or "no leak" in its
 * name or description; null when nothing says.
 */
export function expectation(
  header: IRecordingHeader
): 'healthy' | 'leak' | null {
  if (header.expect === 'healthy' || header.expect === 'leak') {
    return header.expect;
  }
  if (header.scenario in SCENARIOS) {
    return SCENARIOS[header.scenario];
  }
  const words = `${header.scenario} ${header.description ?? ''}`;
  if (/healthy|no[-_ ]?leak/i.test(words)) {
    return 'healthy';
  }
  return /leak/i.test(words) ? 'leak' : null;
}

/** The timeline of one user cell. */
export interface ICellTimeline {
  /** The recording's cell index (`cell` of its execute events). */
  cell: number;
  /** Its execution count, from its end event (null while unknown). */
  executionCount: number | null;
  /** Seconds from the cell's start to its end (or the recording's end). */
  duration: number;
  /** How it ended: `ok`, `error`, `oom` (CUDA out of memory), or `running` (the recording stops first). */
  ended: 'ok' | 'error' | 'oom' | 'running';
  /** The first rising verdict of a climb inside this cell, or null. */
  first: {
    /** Seconds since the cell's start. */
    at: number;
    /** Epochs completed by then (from `progress` or epoch marks), or null where unknown. */
    epochs: number | null;
    /** Its rate (bytes per minute) and shape. */
    rate: number;
    shape: string | null;
    /** The projected seconds until full at that moment (null: beyond the horizon or no room known). */
    projected: number | null;
  } | null;
  /** The projection's error against the OOM: (first.at + projected) − duration, seconds; null without both. */
  error: number | null;
  /** Rising verdicts (of either basis) seen while the cell ran. */
  risingVerdicts: number;
}

/** The whole timeline of a recording. */
export interface ITimeline {
  scenario: string;
  expect: 'healthy' | 'leak' | null;
  cells: ICellTimeline[];
  /** Messages that failed validation (as the connection would drop them). */
  dropped: number;
}

/**
 * Replay a recording's "out" messages through the browser's model and leak
 * trend, and time the verdicts per user cell.
 */
export function leakTimeline(
  recording: IRecording,
  settings: IGpuSettings = DEFAULT_SETTINGS
): ITimeline {
  const model = new GpuKernelModel({ kernelId: 'recording' });
  const cells: ICellTimeline[] = [];
  let current: {
    timeline: ICellTimeline;
    start: number;
    epochMarks: number | null;
  } | null = null;
  let dropped = 0;
  let oomSeen = false;
  let lastAt = 0;
  for (const event of recording.events) {
    lastAt = event.at;
    if ('event' in event && event.event === 'execute') {
      if (event.phase === 'start') {
        current = {
          timeline: {
            cell: event.cell,
            executionCount: null,
            duration: 0,
            ended: 'running',
            first: null,
            error: null,
            risingVerdicts: 0
          },
          start: event.at,
          epochMarks: null
        };
        cells.push(current.timeline);
        oomSeen = false;
      } else if (current && current.timeline.cell === event.cell) {
        const t = current.timeline;
        t.executionCount = event.executionCount ?? null;
        t.duration = event.at - current.start;
        const oom = /out of memory/i.test(event.error ?? '') || oomSeen;
        t.ended = event.status === 'error' ? (oom ? 'oom' : 'error') : 'ok';
        current = null;
      }
      continue;
    }
    if ('event' in event && event.event === 'mark') {
      if (current && /epoch/i.test(event.name)) {
        current.epochMarks = (current.epochMarks ?? 0) + 1;
      }
      continue;
    }
    if (!('dir' in event) || event.dir !== 'out') {
      continue;
    }
    const parsed = parseKernelMessage(event.data);
    if (!parsed.ok) {
      dropped++;
      continue;
    }
    model.apply(parsed.message);
    if (parsed.message.type === 'oom') {
      oomSeen = true;
    }
    if (parsed.message.type !== 'sample' || !current) {
      continue;
    }
    const trend = findLeak(model, settings);
    if (!trend) {
      continue;
    }
    const t = current.timeline;
    t.risingVerdicts++;
    if (t.first === null && trend.basis === 'samples') {
      const progress = (
        parsed.message as { progress?: { epoch: number } | null }
      ).progress;
      const projection = projectFull(trend, model.samples);
      t.first = {
        at: event.at - current.start,
        epochs: progress ? progress.epoch : current.epochMarks,
        rate: trend.rate,
        shape: trend.shape,
        projected: projection?.seconds ?? null
      };
    }
  }
  for (const cell of cells) {
    if (cell.ended === 'running') {
      const start = recording.events.find(
        e => 'event' in e && e.event === 'execute' && e.cell === cell.cell
      );
      cell.duration = lastAt - (start?.at ?? lastAt);
    }
    if (cell.first?.projected !== null && cell.first && cell.ended === 'oom') {
      cell.error = cell.first.at + cell.first.projected! - cell.duration;
    }
  }
  model.dispose();
  return {
    scenario: recording.header.scenario,
    expect: expectation(recording.header),
    cells,
    dropped
  };
}

/** The timeline as a few lines of text. */
export function formatTimeline(timeline: ITimeline): string {
  const lines = [
    `${timeline.scenario} (expected: ${timeline.expect ?? 'not said'}; ${timeline.dropped} messages dropped)`
  ];
  for (const c of timeline.cells) {
    const count = c.executionCount === null ? '[*]' : `[${c.executionCount}]`;
    const head = `  cell ${c.cell} ${count}: ${c.ended} after ${c.duration.toFixed(1)} s`;
    if (!c.first) {
      lines.push(
        `${head}; no rising verdict inside the cell (${c.risingVerdicts} across cells)`
      );
      continue;
    }
    const f = c.first;
    const epochs = f.epochs === null ? '' : ` (${f.epochs} epochs)`;
    const projected =
      f.projected === null
        ? 'no time to full projected'
        : `projected full ${f.projected.toFixed(0)} s later, at ${(f.at + f.projected).toFixed(1)} s`;
    const error =
      c.error === null
        ? ''
        : `; projection error ${c.error >= 0 ? '+' : ''}${c.error.toFixed(1)} s against the OOM`;
    lines.push(
      `${head}; first rising verdict at ${f.at.toFixed(1)} s${epochs}, ${(f.rate / 2 ** 20).toFixed(0)} MiB/min (${f.shape}); ${projected}${error}; ${c.risingVerdicts} rising verdicts`
    );
  }
  return lines.join('\n');
}
