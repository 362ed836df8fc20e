import { Notification } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { fireEvent, render } from '@testing-library/react';
import React from 'react';
import { findings, IFinding } from '../../src/analysis/findings';
import { GpuKernelModel } from '../../src/model';
import { GpuNotifier } from '../../src/notifications';
import { cleanedCounts } from '../../src/notifications/cleaned-toast';
import type { ICleaned } from '../../src/protocol';
import { FindingsTable } from '../../src/panel/tables/finding-table';
import { gaugeState } from '../../src/statusbar/state';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import {
  c01Inventory,
  c08Inventory,
  gpuSample,
  held,
  OneModelMonitor,
  yolo
} from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;

describe('FindingsTable', () => {
  it('lists every finding largest first with severity, bytes, text, evidence and its fix', () => {
    const list = findings({
      inventory: c08Inventory(),
      sample: gpuSample(8000 * MiB, 80_000 * MiB),
      hello: null
    });
    const clicked: IFinding[] = [];
    const { container } = render(
      <FindingsTable
        findings={list}
        onFix={f => clicked.push(f)}
        captionOf={f => `caption of ${f.kind}`}
        trans={trans}
      />
    );
    const items = Array.from(
      container.querySelectorAll('li[data-finding]')
    ) as HTMLElement[];
    expect(items.map(i => [i.dataset.kind, i.dataset.severity])).toEqual([
      ['graph-holder', 'warning'],
      ['cuda-context', 'info'],
      // 256 MiB of an 80,000 MiB device: under the one scale's 0.5 %
      ['traceback-tensors', 'info'],
      ['owner-object', 'info']
    ]);
    expect(items[0].textContent).toContain('Warning');
    expect(items[0].textContent).toContain('1.0 GiB');
    expect(
      items.map(
        i => i.querySelector('[data-action="fix"]')?.textContent ?? null
      )
    ).toEqual([
      'Fix…',
      'Restart kernel',
      'Clean GPU',
      'Drop the finished trainer, keep the model'
    ]);
    expect(items[3].textContent).toContain('model.trainer (finished) holds');
    const evidence = items[3].querySelector(
      '.jp-GpuHygiene-findingEvidence'
    ) as HTMLElement;
    expect(evidence.title).toContain('trainer.optimizer (SGD)');
    expect(
      (items[1].querySelector('[data-action="fix"]') as HTMLElement).title
    ).toBe('caption of cuda-context');
    fireEvent.click(items[2].querySelector('[data-action="fix"]')!);
    expect(clicked.map(f => f.kind)).toEqual(['traceback-tensors']);
  });

  it('shows shared bytes apart: "+ 12.0 MiB shared with last", and Move to CPU…', () => {
    const inventory = {
      ...c01Inventory(),
      models: [],
      roots: [
        {
          kind: 'variable' as const,
          name: 'results',
          bytes: { 'cuda:0': 36 * MiB },
          sole: { 'cuda:0': 24 * MiB },
          shared: { 'cuda:0': 12 * MiB },
          sharedWith: ['last'],
          models: 0,
          tensors: 3
        }
      ]
    };
    const list = findings({ inventory, sample: null, hello: null });
    const { container } = render(
      <FindingsTable findings={list} onFix={() => undefined} trans={trans} />
    );
    const item = container.querySelector(
      'li[data-kind="cuda-tensors"]'
    ) as HTMLElement;
    expect(item.querySelector('.jp-GpuHygiene-findingBytes')?.textContent).toBe(
      '24.0 MiB'
    );
    expect(
      item.querySelector('.jp-GpuHygiene-findingShared')?.textContent
    ).toBe('+ 12.0 MiB shared with last');
    expect(item.querySelector('[data-action="fix"]')?.textContent).toBe(
      'Move to CPU…'
    );
  });

  it('renders nothing without findings', () => {
    const { container } = render(
      <FindingsTable findings={[]} onFix={() => undefined} trans={trans} />
    );
    expect(container.innerHTML).toBe('');
  });
});

describe('gauge: one notion of model', () => {
  it('modules of a collected model are not counted; the tooltip summarises findings', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const layers = ['Conv', 'C2f', 'Detect'].map((className, i) =>
      yolo({
        id: `0x${i + 10}`,
        order: i + 10,
        className,
        label: className,
        holders: [held('hidden', 'unreachable from the namespace')],
        stale: true
      })
    );
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: '0.1.0',
      python: '3.11.7',
      pid: 1,
      torch: null,
      nvml: false,
      nvmlError: 'NVML Shared Library Not Found',
      devices: []
    });
    model.apply({ ...gpuSample(0, 0), devices: [] });
    model.apply({
      ...c01Inventory(),
      models: [c01Inventory().models[1], ...layers]
    });
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.text).toBe('No GPU · 1 model (12.1 MiB RAM)');
    expect(state.tooltip).toContain('Live models: 1 (0 stale)');
    expect(state.tooltip).toContain('Findings: 1 info');
  });
});

describe('cleaned toast: one notion of model', () => {
  afterEach(() => Notification.dismiss());

  it('counts before → after without the modules of a collected model', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const notifier = new GpuNotifier({
      monitor: new OneModelMonitor(model),
      commands: new CommandRegistry(),
      trans
    });
    const layers = ['Conv', 'Conv', 'C2f'].map((className, i) =>
      yolo({
        id: `0x${i + 10}`,
        order: i + 10,
        className,
        label: className,
        holders: [held('hidden', 'unreachable from the namespace')],
        stale: true
      })
    );
    const before = c01Inventory();
    before.models.push(...layers);
    model.apply(before);
    expect(model.cells[0].models.map(m => m.className)).toEqual([
      'YOLO',
      'YOLO'
    ]);
    model.apply({
      ...c01Inventory(),
      seq: 4,
      executionCount: 4,
      models: [c01Inventory().models[1]]
    });
    const cleaned: ICleaned = {
      protocol: 2,
      type: 'cleaned',
      executionCount: 4,
      models: { before: 5, after: 1 },
      freed: { cpu: 12_700_000 },
      allocated: null,
      reserved: null
    };
    expect(cleanedCounts(model, cleaned)).toEqual({ before: 2, after: 1 });
    model.apply(cleaned);
    expect(Notification.manager.notifications[0].message).toBe(
      'Clean GPU freed 12.1 MiB of models (2 → 1 live).'
    );
    // Without the clean cell's mark: the agent's counts.
    expect(cleanedCounts(model, { ...cleaned, executionCount: 9 })).toEqual({
      before: 5,
      after: 1
    });
    notifier.dispose();
  });
});
