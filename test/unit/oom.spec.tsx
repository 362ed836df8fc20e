import { Notification, showDialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { render } from '@testing-library/react';
import React from 'react';
import {
  describeOom,
  isFragmented,
  oomHolders
} from '../../src/analysis/oom/oom-diagnosis';
import {
  oomAdvice,
  parseVersion,
  versionAtLeast
} from '../../src/analysis/oom/oom-advice';
import { GpuKernelModel } from '../../src/model';
import { GpuNotifier } from '../../src/notifications';
import { OomDetails } from '../../src/oom-details';
import { oomMessage, OneModelMonitor } from './fixtures';

jest.mock('@jupyterlab/apputils', () => ({
  ...jest.requireActual('@jupyterlab/apputils'),
  showDialog: jest.fn(async () => ({ button: { accept: false } }))
}));

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const MiB = 2 ** 20;
const GiB = 2 ** 30;
const ids = (oom: Parameters<typeof oomAdvice>[0]) =>
  oomAdvice(oom, trans).map(a => a.id);
const text = (oom: Parameters<typeof oomAdvice>[0]) =>
  oomAdvice(oom, trans)
    .map(a => a.text)
    .join('\n');

/** The C05 situation with a stale model, a graph holder and another process. */
const busy = (overrides = {}) =>
  oomMessage({
    stale: [{ id: '0x1', label: 'YOLO (yolov8n.yaml)', bytes: 12 * MiB }],
    traceback: 256 * MiB,
    graphs: GiB,
    processes: [{ pid: 4242, used: 3 * GiB }],
    ...overrides
  });

describe('versions', () => {
  it('parses release numbers and compares them', () => {
    expect(parseVersion('8.4.190')).toEqual([8, 4, 190]);
    expect(parseVersion('2.14.1+cu130')).toEqual([2, 14, 1]);
    expect(parseVersion('2.3.0a0')).toEqual([2, 3, 0]);
    expect(parseVersion('dev')).toBeNull();
    expect(versionAtLeast('8.2.29', '8.2.29')).toBe(true);
    expect(versionAtLeast('8.2.28', '8.2.29')).toBe(false);
    expect(versionAtLeast('8.10.0', '8.4.13')).toBe(true);
    expect(versionAtLeast('2.1', '2.1.0')).toBe(true);
    expect(versionAtLeast('2.0.1', '2.1')).toBe(false);
    expect(versionAtLeast(null, '2.1')).toBeNull();
  });
});

describe('describeOom', () => {
  it('says what failed, the figures and what held the device, within 140 characters', () => {
    const headline = describeOom(busy(), trans);
    expect(headline).toBe(
      'CUDA out of memory in cell [7]: tried to allocate 20.0 MiB, 3.2 MiB free of 79.2 GiB. Held: other process 3.0 GiB, graphs 1.0 GiB and 2 more'
    );
    expect(headline.length).toBeLessThanOrEqual(140);
  });

  it('lists everything that fits and leaves out what the message lacks', () => {
    expect(
      describeOom(
        oomMessage({
          executionCount: null,
          requested: null,
          free: null,
          traceback: 256 * MiB
        }),
        trans
      )
    ).toBe(
      'CUDA out of memory in cell [*]: 79.2 GiB in total. Held: traceback 256.0 MiB'
    );
    expect(describeOom(oomMessage(), trans)).toBe(
      'CUDA out of memory in cell [7]: tried to allocate 20.0 MiB, 3.2 MiB free of 79.2 GiB.'
    );
  });

  it('lists each holder for the dialog, largest first', () => {
    expect(oomHolders(busy()).map(h => [h.kind, h.label, h.bytes])).toEqual([
      ['process', '4242', 3 * GiB],
      ['graphs', '', GiB],
      ['traceback', '', 256 * MiB],
      ['stale', 'YOLO (yolov8n.yaml)', 12 * MiB]
    ]);
  });
});

describe('oomAdvice', () => {
  it('without Ultralytics: generic torch advice, no expandable_segments when the cache is small', () => {
    const oom = oomMessage();
    expect(isFragmented(oom)).toBe(false);
    expect(ids(oom)).toEqual(['batch', 'no-grad', 'del']);
    expect(text(oom)).toContain('torch.no_grad()');
    expect(text(oom)).not.toContain('expandable_segments');
    expect(text(oom)).not.toMatch(/Ultralytics|imgsz|nbs|amp/);
  });

  it('says what Clean GPU frees, the graph fix and the other processes', () => {
    const advice = oomAdvice(busy(), trans);
    expect(advice.slice(0, 3).map(a => a.id)).toEqual([
      'clean',
      'graphs',
      'processes'
    ]);
    expect(advice[0].text).toBe(
      'Clean GPU frees 268.0 MiB now: stale models and the last traceback, without touching your variables.'
    );
    expect(advice[1].text).toBe(
      'Variables keep autograd graphs alive (1.0 GiB): store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
    );
    expect(advice[2].text).toBe(
      'Other processes use 3.0 GiB of this GPU (pid 4242): stop them or run on another GPU.'
    );
  });

  it('suggests expandable_segments only when reserved − allocated is large', () => {
    const fragmented = oomMessage({
      allocated: 70 * GiB,
      reserved: 76 * GiB
    });
    expect(isFragmented(fragmented)).toBe(true);
    expect(ids(fragmented)[0]).toBe('fragmentation');
    expect(oomAdvice(fragmented, trans)[0].text).toBe(
      'PyTorch had 6.0 GiB reserved but unallocated and still could not place the request: its cache is fragmented. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the kernel’s environment and restart the kernel (it is read when CUDA starts).'
    );
    // Smaller than the request: not fragmentation, the device is just full.
    expect(
      isFragmented(
        oomMessage({
          requested: 2 * GiB,
          allocated: 70 * GiB,
          reserved: 71 * GiB
        })
      )
    ).toBe(false);
    // Below 256 MiB: noise.
    expect(
      isFragmented(
        oomMessage({ allocated: 70 * GiB, reserved: 70 * GiB + 200 * MiB })
      )
    ).toBe(false);
    // torch 2.0 has no expandable segments.
    const old = oomAdvice({ ...fragmented, torch: '2.0.1+cu118' }, trans)[0]
      .text;
    expect(old).toContain('torch 2.1 and later');
    expect(old).not.toContain('Set PYTORCH_CUDA_ALLOC_CONF');
  });

  it('Ultralytics 8.4.190 (installed): AutoBatch, fraction, retry, nbs, imgsz, cache, workers', () => {
    const oom = oomMessage({ ultralytics: '8.4.190' });
    expect(ids(oom)).toEqual([
      'ultralytics-batch',
      'ultralytics-retry',
      'ultralytics-nbs',
      'ultralytics-imgsz',
      'ultralytics-cache',
      'ultralytics-workers'
    ]);
    const advice = oomAdvice(oom, trans);
    expect(advice[0].text).toBe(
      'Ultralytics 8.4.190: train with batch=-1 to let AutoBatch pick a batch that fits this GPU, or batch=0.70 to aim at 70% of its memory (single GPU); or pass a smaller batch. Validation during training uses up to twice the batch.'
    );
    expect(advice[2].text).toContain('round(64 / batch)');
    expect(advice[4].text).toContain('cache=False is already the default');
    expect(advice[5].text).toContain('CPU RAM');
    // Never tells the user to turn on what is already on.
    expect(text(oom)).not.toMatch(/amp=True|enable AMP|mixed precision/i);
    expect(text(oom)).not.toContain('torch.no_grad() (or');
  });

  it('Ultralytics 8.2.28: no fractional batch (8.2.29) and no OOM retry (8.4.13)', () => {
    const oom = oomMessage({ ultralytics: '8.2.28' });
    expect(ids(oom)).not.toContain('ultralytics-retry');
    expect(text(oom)).toContain('batch=-1');
    expect(text(oom)).not.toContain('batch=0.70');
    const mid = oomMessage({ ultralytics: '8.3.0' });
    expect(text(mid)).toContain('batch=0.70');
    expect(ids(mid)).not.toContain('ultralytics-retry');
  });

  it('an unreadable Ultralytics version gets only version-independent advice', () => {
    const oom = oomMessage({ ultralytics: 'unknown' });
    expect(text(oom)).not.toContain('batch=0.70');
    expect(ids(oom)).not.toContain('ultralytics-retry');
    expect(ids(oom)).toContain('ultralytics-nbs');
  });

  it('with Ultralytics and a fragmented cache, both apply', () => {
    const oom = oomMessage({
      ultralytics: '8.4.190',
      allocated: 70 * GiB,
      reserved: 76 * GiB
    });
    expect(ids(oom).slice(0, 2)).toEqual([
      'fragmentation',
      'ultralytics-batch'
    ]);
  });
});

describe('OomDetails', () => {
  it('renders figures, holders and advice; names from the kernel as text', () => {
    const hostile = '<img src=x onerror=alert(1)>';
    const { container } = render(
      <OomDetails
        oom={busy({
          stale: [{ id: '0x1', label: hostile, bytes: 12 * MiB }],
          message: hostile,
          ultralytics: '8.4.190'
        })}
        trans={trans}
      />
    );
    expect(container.querySelector('img')).toBeNull();
    expect(container.textContent).toContain(`stale ${hostile} 12.0 MiB`);
    expect(container.textContent).toContain(`OutOfMemoryError: ${hostile}`);
    expect(container.textContent).toContain('pid 4242 3.0 GiB');
    const advice = Array.from(container.querySelectorAll('[data-advice]')).map(
      li => li.getAttribute('data-advice')
    );
    expect(advice).toContain('ultralytics-batch');
  });
});

describe('OOM toast', () => {
  afterEach(() => {
    Notification.dismiss();
    (showDialog as jest.Mock).mockClear();
  });
  const errors = () =>
    Notification.manager.notifications.filter(n => n.type === 'error');

  it('raises one error toast per cell with Clean GPU and Restart kernel', () => {
    const model = new GpuKernelModel({ kernelId: 'k1' });
    const monitor = new OneModelMonitor(model);
    const commands = new CommandRegistry();
    const calls: Array<[string, unknown]> = [];
    for (const id of ['gpu-hygiene:clean', 'gpu-hygiene:restart-kernel']) {
      commands.addCommand(id, {
        execute: args => void calls.push([id, args])
      });
    }
    const notifier = new GpuNotifier({ monitor, commands, trans });
    model.apply(busy());
    model.apply(busy()); // the same cell again (e.g. a re-sent report)
    expect(errors()).toHaveLength(1);
    expect(errors()[0].message).toBe(describeOom(busy(), trans));
    expect(errors()[0].options.autoClose).toBe(false);
    const actions = errors()[0].options.actions ?? [];
    expect(actions.map(a => a.label)).toEqual([
      'Clean GPU',
      'Restart kernel',
      'What to try…'
    ]);
    actions[0].callback(new MouseEvent('click'));
    actions[1].callback(new MouseEvent('click'));
    expect(calls).toEqual([
      ['gpu-hygiene:clean', { kernelId: 'k1' }],
      ['gpu-hygiene:restart-kernel', { kernelId: 'k1' }]
    ]);
    actions[2].callback(new MouseEvent('click'));
    expect(showDialog).toHaveBeenCalledTimes(1);
    expect((showDialog as jest.Mock).mock.calls[0][0].title).toBe(
      'CUDA out of memory in cell [7]'
    );

    // Another cell fails: a second toast.
    model.apply(busy({ executionCount: 8 }));
    expect(errors()).toHaveLength(2);
    notifier.dispose();
  });

  it('follows warnOnOutOfMemory', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    const monitor = new OneModelMonitor(model, { warnOnOutOfMemory: false });
    const notifier = new GpuNotifier({
      monitor,
      commands: new CommandRegistry(),
      trans
    });
    model.apply(busy());
    expect(errors()).toHaveLength(0);
    expect(model.lastOom?.executionCount).toBe(7);
    notifier.dispose();
  });
});
