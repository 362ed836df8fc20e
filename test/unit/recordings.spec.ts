/**
 * The leak trend on recordings of real sessions (issue 15): every
 * `test/recordings/*.jsonl` (or the files named in `LEAK_RECORDINGS`,
 * separated by commas) is replayed through the browser's model and leak
 * trend (`recording-timeline.ts`), its timeline printed:
 *
 *     npx jest test/unit/recordings.spec.ts
 *     LEAK_RECORDINGS=/path/a.jsonl,/path/b.jsonl npx jest test/unit/recordings.spec.ts
 *
 * A recording whose scenario is healthy (its header's `expect`, else
 * "healthy" or "no leak" in its scenario or description) must show no
 * rising verdict inside any cell. The timeline code itself is checked on two
 * recordings written here from the synthetic shapes.
 */
import * as fs from 'fs';
import * as path from 'path';
import {
  formatTimeline,
  leakTimeline,
  parseRecording
} from './recording-timeline';
import * as S from './leak-shape-cells';

const FOLDER = path.join(__dirname, '..', 'recordings');

function recordingFiles(): string[] {
  const named = process.env.LEAK_RECORDINGS;
  if (named) {
    return named
      .split(',')
      .map(f => f.trim())
      .filter(Boolean);
  }
  if (!fs.existsSync(FOLDER)) {
    return [];
  }
  return fs
    .readdirSync(FOLDER)
    .filter(f => f.endsWith('.jsonl'))
    .sort()
    .map(f => path.join(FOLDER, f));
}

/** A recording of one cell of `shape` (1 Hz samples with the reads), ending at `end` s with `status`. */
function synthetic(
  scenario: string,
  shape: S.IShape,
  end: number,
  error: string | null
): string {
  const lines: unknown[] = [
    {
      format: 'gpu-hygiene-recording',
      version: 1,
      scenario,
      description: 'synthetic',
      recorded: '2026-12-01T00:00:00Z',
      t0: S.T0 - 5,
      env: { device: 'NVIDIA H200', totalBytes: S.H200_TOTAL }
    },
    { at: 4, event: 'execute', phase: 'start', cell: 0, code: 'train()' }
  ];
  for (const sample of S.sampleShape(shape, {
    intervalS: 1,
    subReads: true,
    seed: 1
  })) {
    if (sample.t - S.T0 > end) {
      break;
    }
    lines.push({ at: sample.t - S.T0 + 5, dir: 'out', data: sample });
  }
  lines.push({
    at: end + 5,
    event: 'execute',
    phase: 'end',
    cell: 0,
    executionCount: 3,
    status: error ? 'error' : 'ok',
    ...(error ? { error } : {})
  });
  return lines.map(line => JSON.stringify(line)).join('\n');
}

describe('the timeline of a recording', () => {
  it('times the first rising verdict of a leak, its projection and its OOM', () => {
    const timeline = leakTimeline(
      parseRecording(
        synthetic(
          'stairs-leak',
          S.stairsLeak(4),
          40,
          'OutOfMemoryError: CUDA out of memory.'
        )
      )
    );
    expect(timeline.expect).toBe('leak');
    expect(timeline.dropped).toBe(0);
    const [cell] = timeline.cells;
    expect(cell.ended).toBe('oom');
    expect(cell.duration).toBeCloseTo(41, 0);
    // the cell started 1 s before its first sample
    expect(cell.first!.at).toBeCloseTo(12, 0);
    expect(cell.first!.shape).toBe('stairs');
    expect(cell.first!.projected! / 60).toBeGreaterThan(15);
    // this synthetic OOM is no real one: the projection is far off
    expect(cell.error!).toBeGreaterThan(900);
    expect(formatTimeline(timeline)).toContain(
      'cell 0 [3]: oom after 41.0 s; first rising verdict at 12.0 s'
    );
  });

  it('shows no rising verdict for a healthy training', () => {
    const timeline = leakTimeline(
      parseRecording(
        synthetic('healthy-training', S.healthyTraining(0.05), 60, null)
      )
    );
    expect(timeline.expect).toBe('healthy');
    expect(timeline.cells[0].first).toBeNull();
    expect(timeline.cells[0].risingVerdicts).toBe(0);
  });
});

describe('recordings', () => {
  const files = recordingFiles();
  if (!files.length) {
    it('none in test/recordings (nothing to replay)', () => {
      expect(files).toEqual([]);
    });
  }
  for (const file of files) {
    it(path.basename(file), () => {
      const timeline = leakTimeline(
        parseRecording(fs.readFileSync(file, 'utf8'))
      );
      process.stdout.write(`\n${formatTimeline(timeline)}\n`);
      if (timeline.expect === 'healthy') {
        expect(
          timeline.cells
            .filter(c => c.first !== null)
            .map(c => `cell ${c.cell}: rising at ${c.first!.at.toFixed(1)} s`)
        ).toEqual([]);
      }
    });
  }
});

/**
 * Issue 15's goal on the H200 recordings of the leaking loop: the first
 * rising verdict inside each training cell within max(10 s, 3 epochs) of
 * its start (epoch lengths from the scenario's epoch marks), and, under the
 * 8 GiB allocator cap, the projected time to full within 15 % of the time
 * the cell really had left until its CUDA out-of-memory error.
 */
describe('the H200 leak recordings', () => {
  const read = (name: string) => {
    const file = path.join(FOLDER, `${name}.jsonl`);
    return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
  };
  /** Mean seconds per epoch of cell `cell`, from its `epoch` marks. */
  const epochSeconds = (text: string, cell: number): number => {
    const events = text
      .split('\n')
      .filter(l => l.trim())
      .slice(1)
      .map(l => JSON.parse(l));
    const start = events.find(
      e => e.event === 'execute' && e.phase === 'start' && e.cell === cell
    ).at;
    const end = events.find(
      e => e.event === 'execute' && e.phase === 'end' && e.cell === cell
    ).at;
    const marks = events.filter(
      e =>
        e.event === 'mark' && e.name === 'epoch' && e.at > start && e.at <= end
    );
    return (marks[marks.length - 1].at - start) / marks.length;
  };

  for (const name of ['leak-append-loss', 'leak-append-loss-capped']) {
    it(`${name}: toast within max(10 s, 3 epochs) of each training cell's start`, () => {
      const text = read(name);
      expect(text).toContain('"device":"NVIDIA H200"');
      if (text === null) {
        return;
      }
      const timeline = leakTimeline(parseRecording(text));
      const training = timeline.cells.filter(c => c.duration > 15);
      expect(training.length).toBeGreaterThan(0);
      for (const cell of training) {
        const goal = Math.max(10, 3 * epochSeconds(text, cell.cell));
        expect(cell.first).not.toBeNull();
        expect(cell.first!.at).toBeLessThanOrEqual(goal);
      }
    });
  }

  it('leak-append-loss-capped: the projection against the real OOM', () => {
    const text = read('leak-append-loss-capped');
    expect(text).toContain('"device":"NVIDIA H200"');
    if (text === null) {
      return;
    }
    const cell = leakTimeline(parseRecording(text)).cells.find(
      c => c.ended === 'oom'
    )!;
    const left = cell.duration - cell.first!.at;
    expect(Math.abs(cell.error!)).toBeLessThanOrEqual(0.15 * left);
  });
});
