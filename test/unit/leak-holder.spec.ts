import { nullTranslator } from '@jupyterlab/translation';
import type { IFinding } from '../../src/analysis/findings';
import { leakHolder } from '../../src/analysis/memory/leak';
import type { ILeakTrend } from '../../src/analysis/memory/leak-trend';
import { describeLeak } from '../../src/notifications/text';

const MiB = 2 ** 20;
const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/** A climb of 64 MiB per cell on cuda:0 over 5 cells (the H200 trial's shape). */
function trend(overrides: Partial<ILeakTrend> = {}): ILeakTrend {
  return {
    verdict: 'rising',
    slope: 64 * MiB,
    r2: 0.99,
    points: 5,
    basis: 'cells',
    device: 0,
    rate: 64 * MiB,
    executionCount: null,
    ...overrides
  } as ILeakTrend;
}

function finding(
  kind: IFinding['kind'],
  subject: string,
  mib: number,
  device = 'cuda:0'
): IFinding {
  return {
    kind,
    id: `${kind}:${subject}`,
    severity: 'warning',
    subject,
    bytes: { [device]: mib * MiB },
    explain: () => '',
    evidence: [],
    fix: { kind: 'none' }
  } as unknown as IFinding;
}

describe('leak trend: naming what the inventory knows holds the growth', () => {
  it('three displayed 64 MiB tensors: the output cache, not losses.append', () => {
    const holder = leakHolder(trend(), [
      finding('cuda-context', 'cuda:0', 600),
      finding('output-tensors', '_, __, ___', 192)
    ]);
    expect(holder?.kind).toBe('output-tensors');
    const text = describeLeak(trend(), trans, 1, holder);
    expect(text).toContain('Held by the output cache (_, __, ___)');
    expect(text).toContain('Clean GPU drops it');
    expect(text).not.toContain('losses.append');
    expect(text.length).toBeLessThanOrEqual(140);
  });

  it('a graph holder is named with its fix', () => {
    const holder = leakHolder(trend(), [
      finding('graph-holder', 'val_losses', 1024)
    ]);
    expect(describeLeak(trend(), trans, 1, holder)).toContain(
      'val_losses keeps autograd graphs: store loss.item().'
    );
  });

  it('the largest holder on the climbing device wins; smaller than one cell is no holder', () => {
    const found = [
      finding('cuda-tensors', 'results', 300),
      finding('cuda-tensors', 'small', 8),
      finding('traceback-tensors', 'last traceback', 900, 'cuda:1')
    ];
    expect(leakHolder(trend(), found)?.subject).toBe('results');
    expect(leakHolder(trend({ device: 1 }), found)?.kind).toBe(
      'traceback-tensors'
    );
    expect(
      leakHolder(trend(), [finding('cuda-tensors', 'small', 8)])
    ).toBeNull();
  });

  it('inside one running cell nothing is named (the inventory is the previous cell’s)', () => {
    const inCell = trend({ basis: 'samples', executionCount: null });
    expect(
      leakHolder(inCell, [finding('output-tensors', '_', 4096)])
    ).toBeNull();
    expect(describeLeak(inCell, trans, 1, null)).toContain(
      'losses.append(loss)'
    );
  });

  /** A cell whose floor climbed 490 MiB an epoch of 4 s (~7.2 GiB/min) for 30 s: ~3.6 GiB in all. */
  const climbed = (executionCount: number | null) =>
    trend({
      basis: 'samples',
      executionCount,
      slope: (490 * MiB) / 4,
      rate: ((490 * MiB) / 4) * 60,
      shape: 'stairs',
      since: 1000,
      floor: { t: 1030, bytes: 5000 * MiB },
      interval: 4
    });

  it('once the climbing cell ended, its inventory names the graph holder, with its fix in the text', () => {
    const holders = [
      finding('graph-holder', 'val_losses', 3500),
      finding('cuda-tensors', 'batch', 64)
    ];
    // the inventory of cell [7], the one that climbed
    const holder = leakHolder(climbed(7), holders, 7);
    expect(holder?.subject).toBe('val_losses');
    expect(describeLeak(climbed(7), trans, 1, holder)).toBe(
      'PyTorch allocated climbed ~7.2 GiB per minute in cell [7]. val_losses keeps autograd graphs: store loss.item().'
    );
  });

  it('not before that cell’s own inventory came, and not for a holder of less than half the climb', () => {
    const holders = [finding('graph-holder', 'val_losses', 3500)];
    expect(leakHolder(climbed(null), holders, 6)).toBeNull(); // still running
    expect(leakHolder(climbed(7), holders, 6)).toBeNull(); // the previous cell's inventory
    expect(leakHolder(climbed(7), holders)).toBeNull();
    // 1.5 GiB of a ~3.6 GiB climb: something else holds most of it
    expect(
      leakHolder(climbed(7), [finding('graph-holder', 'val_losses', 1500)], 7)
    ).toBeNull();
  });
});
