import { nullTranslator } from '@jupyterlab/translation';
import { render } from '@testing-library/react';
import React from 'react';
import { cellRows, ICellMark } from '../../src/analysis/cells/cell-history';
import {
  cellEpochs,
  epochsByCell,
  sawAllEpochs
} from '../../src/analysis/cells/epochs';
import { GpuKernelModel } from '../../src/model';
import { panelData } from '../../src/panel/data';
import { CellTable } from '../../src/panel/tables/cell-table';
import { ISample, parseKernelMessage } from '../../src/protocol';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory } from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const GiB = 2 ** 30;

/**
 * A sample at `t` with `allocated` MiB on cuda:0 (reserved 100 MiB above),
 * busy, with the trainer's `[epoch, epochs]` when given.
 */
function sample(
  t: number,
  allocated: number | null,
  progress: [number, number] | null = null,
  busy = true
): ISample {
  return {
    protocol: 2,
    type: 'sample',
    t,
    seq: Math.round(t * 10),
    busy,
    devices:
      allocated === null
        ? []
        : [
            {
              index: 0,
              used: null,
              total: null,
              process: null,
              allocated: allocated * MiB,
              reserved: (allocated + 100) * MiB,
              cached: 100 * MiB,
              nonTorch: null,
              processHidden: false
            }
          ],
    ...(progress
      ? { progress: { epoch: progress[0], epochs: progress[1] } }
      : {})
  };
}

function mark(executionCount: number | null, t: number): ICellMark {
  return { executionCount, t, postRun: t - 0.01, models: [] };
}

/** A 3-epoch training cell [4] from 10 to 20 s, idle samples around, cell [5] after. */
function trainingSamples(): ISample[] {
  return [
    sample(9, 50, null, false),
    sample(10, 60), // the setup: dataset, model
    sample(11, 100, [0, 3]),
    sample(12, 300, [0, 3]),
    sample(13, 200, [0, 3]),
    sample(14, 250, [1, 3]),
    sample(15, 400, [1, 3]),
    sample(16, 380, [2, 3]),
    sample(17, 500), // the final validation: no progress
    sample(20.5, 120, [0, 3], false), // idle: never counted (an agent never sends it)
    sample(21, 130, null, false),
    sample(22, 900, [0, 2]) // the next cell's training
  ];
}

describe('cellEpochs', () => {
  it('finds the epochs of a training cell and the peaks of each', () => {
    const epochs = cellEpochs(trainingSamples(), 10, 20, 0);
    expect(epochs).toEqual({
      trainings: [
        {
          epochs: 3,
          peaks: [
            {
              epoch: 0,
              start: 11,
              end: 13,
              samples: 3,
              allocated: 300 * MiB,
              reserved: 400 * MiB
            },
            {
              epoch: 1,
              start: 14,
              end: 15,
              samples: 2,
              allocated: 400 * MiB,
              reserved: 500 * MiB
            },
            {
              epoch: 2,
              start: 16,
              end: 16,
              samples: 1,
              allocated: 380 * MiB,
              reserved: 480 * MiB
            }
          ]
        }
      ]
    });
    expect(sawAllEpochs(epochs!.trainings[0])).toBe(true);
  });

  it('gives null for a cell without progress or without samples', () => {
    const samples = trainingSamples();
    expect(cellEpochs(samples, 21, 21.5, 0)).toBeNull();
    expect(cellEpochs(samples, null, 20, 0)).toBeNull();
    expect(cellEpochs([], 10, 20, 0)).toBeNull();
  });

  it('splits two trainings of one cell where the epoch goes down', () => {
    const samples = [
      sample(1, 10, [0, 2]),
      sample(2, 20, [1, 2]),
      sample(3, 30, [0, 5]),
      sample(4, 40, [1, 5])
    ];
    const epochs = cellEpochs(samples, 1, 5, 0)!;
    expect(epochs.trainings.map(t => t.epochs)).toEqual([2, 5]);
    expect(epochs.trainings.map(t => t.peaks.map(p => p.epoch))).toEqual([
      [0, 1],
      [0, 1]
    ]);
    expect(epochs.trainings.map(sawAllEpochs)).toEqual([true, false]);
  });

  it('has no peaks without CUDA figures, and misses an epoch no sample saw', () => {
    const samples = [sample(1, null, [0, 3]), sample(2, null, [2, 3])];
    const [training] = cellEpochs(samples, 1, 2, 0)!.trainings;
    expect(training.peaks.map(p => [p.epoch, p.allocated])).toEqual([
      [0, null],
      [2, null]
    ]);
    expect(sawAllEpochs(training)).toBe(false);
  });

  it('follows the rows of cellRows', () => {
    const samples = trainingSamples();
    const rows = cellRows(
      samples,
      [mark(null, 8), mark(4, 20), mark(5, 23)],
      0
    );
    const epochs = epochsByCell(samples, rows, 0);
    expect(rows.map(r => r.executionCount)).toEqual([4, 5]);
    expect(epochs.map(e => e?.trainings[0].epochs ?? null)).toEqual([3, 2]);
    expect(epochs[0]!.trainings[0].peaks).toHaveLength(3);
  });
});

describe('sample.progress in the protocol', () => {
  const base = sample(1, 10);
  it.each([
    ['absent', true, base],
    ['null', true, { ...base, progress: null }],
    ['epoch 0 of 1', true, { ...base, progress: { epoch: 0, epochs: 1 } }],
    ['no epochs', false, { ...base, progress: { epoch: 0, epochs: 0 } }],
    [
      'a negative epoch',
      false,
      { ...base, progress: { epoch: -1, epochs: 3 } }
    ],
    ['a fraction', false, { ...base, progress: { epoch: 0.5, epochs: 3 } }],
    ['no epoch', false, { ...base, progress: { epochs: 3 } }]
  ])('%s: valid %s', (_name, valid, message) => {
    expect(parseKernelMessage(message).ok).toBe(valid);
  });
});

describe('CellTable epochs', () => {
  const samples = trainingSamples();
  const rows = cellRows(samples, [mark(null, 8), mark(4, 20), mark(5, 23)], 0);

  it('adds a line with the epochs and the peak per epoch under a training cell', () => {
    const { container } = render(
      <CellTable
        cells={rows}
        epochs={epochsByCell(samples, rows, 0)}
        gpu={true}
        trans={trans}
      />
    );
    // still one row per execution, newest first, each followed by its line
    const execs = container.querySelectorAll('tr[data-execution-count]');
    expect(
      Array.from(execs).map(r => r.getAttribute('data-execution-count'))
    ).toEqual(['5', '4']);
    const line = container.querySelector('tr[data-epochs-of="4"]')!;
    expect(line.previousElementSibling).toBe(execs[1]);
    expect(line.textContent).toBe(
      'Training: 3 epochs, peak per epoch: 1: 300.0 MiB, 2: 400.0 MiB, 3: 380.0 MiB'
    );
    const td = line.querySelector('td[colspan="4"]')!;
    expect(td.getAttribute('title')).toBe(
      [
        'Epoch 1: peak allocated 300.0 MiB, reserved 400.0 MiB (3 samples)',
        'Epoch 2: peak allocated 400.0 MiB, reserved 500.0 MiB (2 samples)',
        'Epoch 3: peak allocated 380.0 MiB, reserved 480.0 MiB (1 sample)'
      ].join('\n')
    );
    // cell [5]: its training had begun, one sample in: epoch 1 of 2
    expect(container.querySelector('tr[data-epochs-of="5"]')!.textContent).toBe(
      'Training: epoch 1 of 2, peak per epoch: 1: 900.0 MiB'
    );
  });

  it('says only the epochs without a GPU, and nothing without epochs', () => {
    const { container, rerender } = render(
      <CellTable
        cells={rows}
        epochs={epochsByCell(samples, rows, 0)}
        gpu={false}
        trans={trans}
      />
    );
    const line = container.querySelector('tr[data-epochs-of="4"]')!;
    expect(line.textContent).toBe('Training: 3 epochs');
    expect(line.querySelector('td[colspan="2"]')!.getAttribute('title')).toBe(
      'Epoch 1 (3 samples)\nEpoch 2 (2 samples)\nEpoch 3 (1 sample)'
    );
    rerender(<CellTable cells={rows} gpu={true} trans={trans} />);
    expect(container.querySelector('.jp-GpuHygiene-epochs')).toBeNull();
  });

  it('shortens a long training to its first and last three epochs', () => {
    const long = Array.from({ length: 12 }, (_, k) =>
      sample(1 + k, 100 + k, [k, 300])
    );
    const [row] = cellRows(long, [mark(null, 0.5), mark(9, 14)], 0);
    const { container } = render(
      <CellTable
        cells={[row]}
        epochs={epochsByCell(long, [row], 0)}
        gpu={true}
        trans={trans}
      />
    );
    const line = container.querySelector('.jp-GpuHygiene-epochs')!;
    expect(line.textContent).toBe(
      'Training: epochs 1–12 of 300, peak per epoch: 1: 100.0 MiB, 2: 101.0 MiB, ' +
        '3: 102.0 MiB, …, 10: 109.0 MiB, 11: 110.0 MiB, 12: 111.0 MiB'
    );
    expect(
      line.querySelector('td')!.nextElementSibling!.getAttribute('title')
    ).toContain('Epoch 12: peak allocated 111.0 MiB');
  });
});

describe('panelData', () => {
  it('carries the epochs of each cell from the model', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: '0.5.0',
      python: '3.11.7',
      pid: 1,
      torch: '2.14.1',
      nvml: false,
      nvmlError: null,
      devices: [
        {
          index: 0,
          nvmlIndex: 0,
          name: 'NVIDIA H200',
          total: 141 * GiB,
          uuid: null
        }
      ]
    });
    const t0 = 1_764_496_000;
    model.apply({ ...c01Inventory(), t: t0, executionCount: null });
    for (const s of trainingSamples()) {
      model.apply({ ...s, t: t0 + s.t });
    }
    model.apply({ ...c01Inventory(), t: t0 + 20, executionCount: 4 });
    const data = panelData(model, DEFAULT_SETTINGS, null);
    expect(data.cells.map(c => c.executionCount)).toEqual([4]);
    expect(data.cellEpochs).toHaveLength(1);
    expect(
      data.cellEpochs[0]!.trainings[0].peaks.map(p => p.allocated)
    ).toEqual([300 * MiB, 400 * MiB, 380 * MiB]);
  });
});
