import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';
import { act, render, screen, within } from '@testing-library/react';
import React from 'react';
import { GpuKernelModel } from '../../src/model';
import type { IHello } from '../../src/protocol';
import { GaugeComponent, GpuGauge } from '../../src/statusbar/gauge';
import { GaugeModel } from '../../src/statusbar/gauge-model';
import { GaugeDetails } from '../../src/statusbar/popup';
import { gaugeState, levelOf } from '../../src/statusbar/state';
import { CommandIDs, DEFAULT_SETTINGS } from '../../src/tokens';
import {
  atSample,
  c01Inventory,
  gpuSample,
  h200Hello,
  OneModelMonitor
} from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const GiB = 2 ** 30;

function readyModel(): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  model.apply({ ...h200Hello(), agentVersion: '0.1.0' });
  return model;
}

describe('levelOf', () => {
  it('changes colour at the settings thresholds', () => {
    expect(levelOf(0.5, DEFAULT_SETTINGS)).toBe('ok');
    expect(levelOf(0.75, DEFAULT_SETTINGS)).toBe('warn');
    expect(levelOf(0.95, DEFAULT_SETTINGS)).toBe('critical');
  });
});

/** The hello of a kernel without NVML (and no CUDA device). */
function noNvmlHello(): IHello {
  return {
    protocol: 2,
    type: 'hello',
    agentVersion: '0.12.0',
    python: '3.11.7',
    pid: 1,
    torch: null,
    nvml: false,
    nvmlError: 'NVML Shared Library Not Found',
    devices: []
  };
}

describe('gaugeState', () => {
  it('shows used / total with the breakdown in the tooltip', () => {
    const model = readyModel();
    model.apply(gpuSample(120 * GiB, 141 * GiB));
    model.apply(c01Inventory());
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    expect(state.kind).toBe('gpu');
    expect(state.text).toBe('VRAM 120.0 GiB / 141.0 GiB');
    expect(state.level).toBe('warn');
    expect(state.fraction).toBeCloseTo(120 / 141);
    expect(state.tooltip).toEqual([
      'NVIDIA H200 (cuda:0)',
      'Device used: 120.0 GiB of 141.0 GiB (NVML, all processes)',
      'This kernel: 700.0 MiB (NVML, includes the CUDA context)',
      'In use by tensors: 40.0 MiB (PyTorch allocated)',
      'Cached by PyTorch: 24.0 MiB — free for this kernel, released by empty_cache()',
      'CUDA context and libraries: 636.0 MiB — freed only by restarting the kernel',
      'Not a leak: most of this kernel’s VRAM is PyTorch’s reusable cache and the CUDA context, not live tensors.',
      // issue 17: the findings summary (the stale YOLO, 12 MiB of RAM, and the
      // CUDA context: infos on the one scale of issue 28)
      'Findings: 2 infos',
      'Live models: 2 (1 stale)'
    ]);
  });

  it('says the GPU utilisation and this kernel’s share where NVML gives them (agent 0.13.0)', () => {
    const lines = (
      utilization?: number | null,
      processUtilization?: number | null
    ) => {
      const model = readyModel();
      const sample = gpuSample(120 * GiB, 141 * GiB);
      Object.assign(sample.devices[0], { utilization, processUtilization });
      model.apply(sample);
      return gaugeState(
        model,
        DEFAULT_SETTINGS,
        trans,
        null,
        atSample(model)
      ).tooltip.filter(line => line.startsWith('GPU utilisation'));
    };
    expect(lines(87, 80)).toEqual([
      'GPU utilisation: 87 % (NVML, all processes), this kernel 80 %'
    ]);
    // no per-process sample since the last one: the device's figure alone
    expect(lines(87, null)).toEqual([
      'GPU utilisation: 87 % (NVML, all processes)'
    ]);
    // an older agent, a MIG instance: no line rather than a made-up 0 %
    expect(lines(undefined, undefined)).toEqual([]);
    expect(lines(null, null)).toEqual([]);
  });

  it('counts the findings the panel lists: none under the floor (findingFloorMiB)', () => {
    const model = readyModel();
    model.apply(gpuSample(120 * GiB, 141 * GiB));
    model.apply(c01Inventory());
    // the 12.1 MiB stale YOLO is under a 16 MiB floor; the CUDA context is not
    const state = gaugeState(
      model,
      { ...DEFAULT_SETTINGS, findingFloorMiB: 16 },
      trans
    );
    expect(state.tooltip).toContain('Findings: 1 info');
    expect(state.tooltip.join('\n')).not.toMatch(/warning/);
  });

  it('says "No GPU" and still counts models and their RAM', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    model.apply(noNvmlHello());
    model.apply({ ...gpuSample(0, 0), devices: [] });
    model.apply(c01Inventory());
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    expect(state.kind).toBe('no-gpu');
    expect(state.text).toBe('No GPU · 2 models (24.2 MiB RAM)');
    // A plain sentence first; NVML's raw error is a secondary note.
    expect(state.details.lead).toBe('No NVIDIA GPU visible to this kernel');
    expect(state.details.notes).toEqual([
      'VRAM not measurable: NVML Shared Library Not Found'
    ]);
    expect(state.tooltip.slice(0, 2)).toEqual([
      'No NVIDIA GPU visible to this kernel',
      'VRAM not measurable: NVML Shared Library Not Found'
    ]);
    expect(state.details.summary).toContain('Live models: 2 (1 stale)');
    expect(state.fraction).toBeNull();
    // an older agent's sample has no ram: no process line
    expect(state.details.summary.join('\n')).not.toContain('process');
  });

  it('without a GPU, the kernel process’s resident RAM beside its models’ (agent 0.12.0)', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    model.apply(noNvmlHello());
    model.apply({ ...gpuSample(0, 0), devices: [] });
    model.apply(c01Inventory());
    model.apply({
      ...gpuSample(0, 0, 2),
      devices: [],
      ram: { rss: 3.7 * 2 ** 30, total: 32 * 2 ** 30 }
    });
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    // the status bar says the process's RAM, the figure users know; the
    // models' own RAM is in the details
    expect(state.text).toBe('No GPU · 2 models · 3.7 GiB RAM');
    expect(state.details.summary).toContain('Model memory in RAM: 24.2 MiB');
    expect(state.details.summary).toContain(
      'This kernel’s process: 3.7 GiB resident, of 32.0 GiB it may use (RAM)'
    );
    model.apply({
      ...gpuSample(0, 0, 3),
      devices: [],
      ram: { rss: 2 ** 30, total: null }
    });
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).details
        .summary
    ).toContain('This kernel’s process: 1.0 GiB resident (RAM)');
  });

  it('says when the kernel is not supported, dead or restarting', () => {
    const model = new GpuKernelModel({ kernelId: 'k3' });
    model.setStatus('unsupported', 'R');
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).text
    ).toBe('GPU hygiene: kernel not supported');
    model.setStatus('dead');
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).kind
    ).toBe('dead');
    model.setStatus('restarting');
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).kind
    ).toBe('restarting');
  });

  it('says why the kernel is dead and what happens next', () => {
    const model = new GpuKernelModel({ kernelId: 'k4' });
    const line = () =>
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model))
        .tooltip[0];
    model.setStatus('dead');
    expect(line()).toBe('The kernel died. Restart it to measure again.');
    model.setDead('exited');
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).text
    ).toBe('VRAM: kernel dead');
    expect(line()).toMatch(
      /^The server reports that the kernel process has exited/
    );
    model.setDead('restarting');
    expect(line()).toMatch(/^The kernel process died .* JupyterLab is/);
  });

  it('keeps each agent error to one line of at most 300 characters', () => {
    const model = readyModel();
    model.apply({
      protocol: 2,
      type: 'error',
      where: 'inventory',
      message: `RuntimeError: ${'x'.repeat(9000)}\nsecond line`
    });
    const [line] = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip.filter(l => l.startsWith('Agent error'));
    expect(line.startsWith('Agent error (inventory): RuntimeError: xxx')).toBe(
      true
    );
    expect(line.endsWith('…')).toBe(true);
    expect(line.length).toBeLessThan(330);
  });

  it('says when NVML does not list the kernel process', () => {
    const model = readyModel();
    const sample = gpuSample(GiB, 141 * GiB);
    sample.devices[0].process = null;
    model.apply(sample);
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    expect(state.tooltip[2]).toBe(
      'This kernel: not listed by NVML (no CUDA context yet, or the kernel’s container hides its pid)'
    );
  });

  it('lists agent errors once in the tooltip', () => {
    const model = readyModel();
    const error = {
      protocol: 2 as const,
      type: 'error' as const,
      where: 'nvml' as const,
      message: 'Driver Not Loaded'
    };
    model.apply(error);
    model.apply(error);
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    expect(
      state.tooltip.filter(l => l.includes('Driver Not Loaded'))
    ).toHaveLength(1);
  });
});

describe('gaugeState bands (protocol 2)', () => {
  const MiB = 2 ** 20;
  /** One device sample with this kernel's figures (bytes). */
  function bandSample(fig: {
    process: number | null;
    allocated: number;
    reserved: number;
    nonTorch: number | null;
    processHidden?: boolean;
  }) {
    const sample = gpuSample(3 * GiB, 141 * GiB);
    sample.devices[0] = {
      ...sample.devices[0],
      process: fig.process,
      allocated: fig.allocated,
      reserved: fig.reserved,
      cached: fig.reserved - fig.allocated,
      nonTorch: fig.nonTorch,
      processHidden: fig.processHidden ?? false
    };
    return sample;
  }
  const noModels = () => ({ ...c01Inventory(), models: [], roots: [] });

  it('C10: 1 GiB cached after del is a band of its own, not a leak', () => {
    const model = readyModel();
    // V-gpu: 32 MiB allocated (cuBLAS workspace), 1056 MiB reserved.
    model.apply(
      bandSample({
        process: 1676 * MiB,
        allocated: 32 * MiB,
        reserved: 1056 * MiB,
        nonTorch: 620 * MiB
      })
    );
    model.apply(noModels());
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    expect(state.tooltip).toEqual([
      'NVIDIA H200 (cuda:0)',
      'Device used: 3.0 GiB of 141.0 GiB (NVML, all processes)',
      'This kernel: 1.6 GiB (NVML, includes the CUDA context)',
      'In use by tensors: 32.0 MiB (PyTorch allocated)',
      'Cached by PyTorch: 1.0 GiB — free for this kernel, released by empty_cache()',
      'CUDA context and libraries: 620.0 MiB — freed only by restarting the kernel',
      'Not a leak: most of this kernel’s VRAM is PyTorch’s reusable cache and the CUDA context, not live tensors.',
      // issue 17: the CUDA context is a finding (info)
      'Findings: 1 info',
      'Live models: none'
    ]);
    expect(state.tooltip.join('\n')).not.toMatch(/stale|climbs|leaking/);
  });

  it('C11: ≈680 MiB of CUDA context with nothing allocated is never promised back', () => {
    const model = readyModel();
    // V-gpu: NVML 716 MiB for the process, torch reserved 32 MiB.
    model.apply(
      bandSample({
        process: 716 * MiB,
        allocated: 32 * MiB,
        reserved: 32 * MiB,
        nonTorch: 684 * MiB
      })
    );
    model.apply(noModels());
    const tooltip = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip;
    expect(tooltip).toContain(
      'CUDA context and libraries: 684.0 MiB — freed only by restarting the kernel'
    );
    expect(tooltip).toContain(
      'Cached by PyTorch: 0 B — free for this kernel, released by empty_cache()'
    );
    expect(tooltip.some(l => l.startsWith('Not a leak'))).toBe(true);
  });

  it('does not call it "not a leak" when a stale model holds the device', () => {
    const model = readyModel();
    model.apply(
      bandSample({
        process: 716 * MiB,
        allocated: 44 * MiB,
        reserved: 64 * MiB,
        nonTorch: 652 * MiB
      })
    );
    const inventory = c01Inventory();
    inventory.models[0].bytes = { 'cuda:0': 12 * MiB };
    model.apply(inventory);
    const tooltip = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip;
    expect(tooltip.some(l => l.startsWith('Not a leak'))).toBe(false);
  });

  it('does not call it "not a leak" while a finding holds bytes on the device (issue 28)', () => {
    const model = readyModel();
    // mostly cache and context, as in C10, but a variable keeps 256 MiB of
    // CUDA tensors outside any model (a stored exception's frames, an
    // optimizer of a deleted model read the same way)
    model.apply(
      bandSample({
        process: 1676 * MiB,
        allocated: 288 * MiB,
        reserved: 1056 * MiB,
        nonTorch: 620 * MiB
      })
    );
    const held = { 'cuda:0': 256 * MiB };
    model.apply({
      ...noModels(),
      roots: [
        {
          kind: 'variable',
          name: 'err',
          bytes: held,
          sole: held,
          shared: {},
          sharedWith: [],
          models: 0,
          tensors: 3
        }
      ]
    });
    const tooltip = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip;
    expect(tooltip.some(l => l.startsWith('Findings: '))).toBe(true);
    expect(tooltip.some(l => l.startsWith('Not a leak'))).toBe(false);
    // the same figures with nothing held: the note is back
    model.apply(noModels());
    expect(
      gaugeState(
        model,
        DEFAULT_SETTINGS,
        trans,
        null,
        atSample(model)
      ).tooltip.some(l => l.startsWith('Not a leak'))
    ).toBe(true);
  });

  it('splits the cache into what empty_cache() returns and what fragmentation keeps (issue 28)', () => {
    const model = readyModel();
    const sample = bandSample({
      process: 1676 * MiB,
      allocated: 32 * MiB,
      reserved: 372 * MiB,
      nonTorch: 620 * MiB
    });
    model.apply(sample);
    const allocator = (reserved: number) => ({
      expandableSegments: false,
      devices: [
        {
          index: 0,
          reserved,
          allocated: 32 * MiB,
          active: 32 * MiB,
          inactiveSplit: 330 * MiB,
          releasable: 10 * MiB,
          segments: 3,
          allocRetries: 0
        }
      ]
    });
    model.apply({ ...noModels(), allocator: allocator(372 * MiB) });
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).tooltip
    ).toContain(
      'Cached by PyTorch: 340.0 MiB — free for this kernel; empty_cache() returns 10.0 MiB of it, partly used blocks keep 330.0 MiB (fragmentation)'
    );
    // statistics of another state (the reserved bytes moved since): not used
    model.apply({ ...noModels(), allocator: allocator(500 * MiB) });
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans, null, atSample(model)).tooltip
    ).toContain(
      'Cached by PyTorch: 340.0 MiB — free for this kernel, released by empty_cache()'
    );
  });

  it('says when NVML does not see the process and uses torch’s counters', () => {
    const model = readyModel();
    model.apply(
      bandSample({
        process: null,
        allocated: GiB,
        reserved: 2 * GiB,
        nonTorch: null,
        processHidden: true
      })
    );
    const tooltip = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip;
    expect(tooltip.slice(2, 5)).toEqual([
      'This kernel: NVML does not see this kernel’s process (container pid namespace); the figures below come from torch’s counters',
      'In use by tensors: 1.0 GiB (PyTorch allocated)',
      'Cached by PyTorch: 1.0 GiB — free for this kernel, released by empty_cache()'
    ]);
    expect(tooltip.join('\n')).not.toContain('CUDA context and libraries');
  });

  it('shows the bands of every device this kernel uses', () => {
    const model = readyModel();
    const sample = bandSample({
      process: 4 * GiB,
      allocated: 3 * GiB,
      reserved: 3 * GiB + 256 * MiB,
      nonTorch: 768 * MiB
    });
    sample.devices.push(
      {
        ...sample.devices[0],
        index: 1,
        process: 900 * MiB,
        allocated: 100 * MiB,
        reserved: 128 * MiB,
        cached: 28 * MiB,
        nonTorch: 772 * MiB
      },
      {
        ...sample.devices[0],
        index: 2,
        process: null,
        allocated: null,
        reserved: null,
        cached: null,
        nonTorch: null
      }
    );
    model.apply(sample);
    const tooltip = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    ).tooltip;
    expect(tooltip[0]).toBe('NVIDIA H200 (cuda:0)');
    expect(tooltip).toContain('GPU 1 (cuda:1)');
    // CUDA_VISIBLE_DEVICES=3: cuda:0 is nvidia-smi's GPU 3.
    const visible = readyModel();
    visible.hello!.devices[0].nvmlIndex = 3;
    visible.apply(gpuSample(GiB, 141 * GiB));
    expect(
      gaugeState(visible, DEFAULT_SETTINGS, trans, null, atSample(visible))
        .tooltip[0]
    ).toBe('NVIDIA H200 (cuda:0, nvidia-smi GPU 3)');
    expect(tooltip).toContain(
      'In use by tensors: 100.0 MiB (PyTorch allocated)'
    );
    expect(tooltip).not.toContain('GPU 2 (cuda:2)');
  });
});

describe('GaugeComponent', () => {
  it('renders text, tooltip, level and bar width', () => {
    const model = readyModel();
    model.apply(gpuSample(135 * GiB, 141 * GiB));
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    const { container } = render(<GaugeComponent state={state} />);
    expect(screen.getByText('VRAM 135.0 GiB / 141.0 GiB')).toBeTruthy();
    const root = container.querySelector('.jp-GpuHygiene-gauge') as HTMLElement;
    expect(root.dataset.level).toBe('critical');
    expect(root.title).toContain('Device used: 135.0 GiB of 141.0 GiB');
    const meter = screen.getByRole('meter');
    expect(meter.getAttribute('aria-valuenow')).toBe('96');
    const fill = container.querySelector(
      '.jp-GpuHygiene-gaugeFill'
    ) as HTMLElement;
    expect(fill.style.width).toBe('96%');
    expect(fill.className).toContain('jp-GpuHygiene-level-critical');
  });

  it('renders names from the kernel as text, never as HTML', () => {
    const model = readyModel();
    model.apply(gpuSample(GiB, 141 * GiB));
    const inventory = c01Inventory();
    model.apply(inventory);
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    state.text = '<img src=x onerror=alert(1)>';
    const { container } = render(<GaugeComponent state={state} />);
    expect(container.querySelector('img')).toBeNull();
    expect(screen.getByText('<img src=x onerror=alert(1)>')).toBeTruthy();
  });
});

describe('GaugeDetails (the popup body)', () => {
  it('shows the breakdown as headed lists, not one text blob', () => {
    const model = readyModel();
    model.apply(gpuSample(120 * GiB, 141 * GiB));
    model.apply(c01Inventory());
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    render(
      <GaugeDetails
        state={state}
        trans={trans}
        actions={{ openPanel: () => {}, clean: () => {}, canClean: true }}
      />
    );
    expect(screen.getByRole('heading', { level: 2 }).textContent).toBe(
      'GPU memory of this kernel'
    );
    const device = screen.getByRole('region', {
      name: 'NVIDIA H200 (cuda:0)'
    });
    const items = within(device)
      .getAllByRole('listitem')
      .map(li => li.textContent);
    expect(items).toEqual(state.details.devices[0].lines);
    expect(items).toContain(
      'Device used: 120.0 GiB of 141.0 GiB (NVML, all processes)'
    );
    const summary = screen.getByRole('region', { name: 'Models and findings' });
    expect(within(summary).getByText('Live models: 2 (1 stale)')).toBeTruthy();
    expect(within(summary).getByText(/^Findings: /)).toBeTruthy();
    expect(
      screen.getByRole('button', { name: 'Open VRAM panel' })
    ).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Clean GPU' })).toBeTruthy();
  });

  it('leads the no-GPU state with a plain sentence, the raw error smaller', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: '0.1.0',
      python: '3.11.7',
      pid: 1,
      torch: null,
      nvml: false,
      nvmlError: 'NVMLError_LibraryNotFound: NVML Shared Library Not Found',
      devices: []
    });
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      null,
      atSample(model)
    );
    const { container } = render(
      <GaugeDetails state={state} trans={trans} actions={{ canClean: false }} />
    );
    const lead = container.querySelector('.jp-GpuHygiene-popupLead')!;
    expect(lead.textContent).toBe('No NVIDIA GPU visible to this kernel');
    const note = container.querySelector('.jp-GpuHygiene-popupNote')!;
    expect(note.textContent).toBe(
      'VRAM not measurable: NVMLError_LibraryNotFound: NVML Shared Library Not Found'
    );
    // The lead comes before the raw error.
    expect(
      lead.compareDocumentPosition(note) & Node.DOCUMENT_POSITION_FOLLOWING
    ).toBeTruthy();
    expect(container.querySelectorAll('button')).toHaveLength(0);
  });
});

describe('GpuGauge popup', () => {
  beforeAll(() => {
    // jsdom has no ResizeObserver (the Popup watches its body's size).
    (globalThis as any).ResizeObserver ??= class {
      observe(): void {}
      disconnect(): void {}
    };
  });

  function setUp() {
    const kernelModel = readyModel();
    kernelModel.apply(gpuSample(120 * GiB, 141 * GiB));
    const monitor = new OneModelMonitor(kernelModel);
    const model = new GaugeModel(monitor);
    const commands = new CommandRegistry();
    const ran: Array<{ id: string; args: unknown }> = [];
    for (const id of [CommandIDs.openPanel, CommandIDs.clean]) {
      commands.addCommand(id, {
        execute: args => void ran.push({ id, args })
      });
    }
    const gauge = new GpuGauge(model, trans, { commands, popup: true });
    act(() => {
      Widget.attach(gauge, document.body);
      gauge.update();
    });
    const button = () =>
      gauge.node.querySelector<HTMLElement>('.jp-GpuHygiene-gauge')!;
    return { gauge, button, ran, kernelModel, model, monitor };
  }

  async function flush(gauge: GpuGauge): Promise<void> {
    await act(async () => {
      gauge.update();
      await new Promise(resolve => requestAnimationFrame(resolve));
    });
  }

  it('is a focusable button that opens a labelled dialog, Escape closes it', async () => {
    const { gauge, button, model, monitor, kernelModel } = setUp();
    await flush(gauge);
    expect(button().getAttribute('role')).toBe('button');
    expect(button().tabIndex).toBe(0);
    expect(button().getAttribute('aria-haspopup')).toBe('dialog');
    expect(button().getAttribute('aria-expanded')).toBe('false');
    expect(button().title).toBe('GPU memory — click for details');

    button().focus();
    act(() => {
      button().dispatchEvent(
        new KeyboardEvent('keydown', { key: 'Enter', bubbles: true })
      );
    });
    await flush(gauge);
    const dialog = document.querySelector<HTMLElement>('[role="dialog"]')!;
    expect(dialog).not.toBeNull();
    expect(document.activeElement).toBe(dialog);
    expect(dialog.getAttribute('aria-labelledby')).toBe(
      'jp-GpuHygiene-popupTitle'
    );
    expect(
      document.getElementById('jp-GpuHygiene-popupTitle')?.textContent
    ).toBe('GPU memory of this kernel');
    expect(dialog.textContent).toContain(
      'Device used: 120.0 GiB of 141.0 GiB (NVML, all processes)'
    );
    expect(button().getAttribute('aria-expanded')).toBe('true');
    // a user looks: fresh figures asked for (issue 40: never on a timer)
    expect(monitor.askedFor).toEqual([kernelModel]);

    act(() => {
      dialog.dispatchEvent(
        new KeyboardEvent('keydown', { key: 'Escape', bubbles: true })
      );
    });
    await flush(gauge);
    expect(gauge.popup).toBeNull();
    expect(document.querySelector('[role="dialog"]')).toBeNull();
    expect(document.activeElement).toBe(button());
    expect(button().getAttribute('aria-expanded')).toBe('false');
    act(() => gauge.dispose());
    model.dispose();
  });

  it('runs Open VRAM panel and Clean GPU through the commands, closing first', async () => {
    const { gauge, button, ran, kernelModel, model } = setUp();
    await flush(gauge);
    act(() => button().click());
    await flush(gauge);
    await act(async () => {
      await new Promise(resolve => requestAnimationFrame(resolve));
    });
    const dialog = document.querySelector<HTMLElement>('[role="dialog"]')!;
    // Clean GPU is the primary button, Open VRAM panel the secondary one
    expect(
      dialog
        .querySelector('[data-action="clean"]')!
        .classList.contains('jp-mod-accept')
    ).toBe(true);
    expect(
      dialog
        .querySelector('[data-action="open-panel"]')!
        .classList.contains('jp-mod-reject')
    ).toBe(true);
    // (jsdom lays nothing out: the HoverBox hides the popup, so by selector)
    act(() =>
      dialog.querySelector<HTMLElement>('[data-action="clean"]')!.click()
    );
    expect(gauge.popup).toBeNull();
    expect(ran).toEqual([
      { id: CommandIDs.clean, args: { kernelId: kernelModel.kernelId } }
    ]);
    // A second click toggles: open (its chunk loaded), then the gauge again
    // closes it.
    act(() => button().click());
    await flush(gauge);
    expect(gauge.popup).not.toBeNull();
    act(() => button().click());
    expect(gauge.popup).toBeNull();
    act(() => button().click());
    await flush(gauge);
    await act(async () => {
      await new Promise(resolve => requestAnimationFrame(resolve));
    });
    act(() =>
      document
        .querySelector<HTMLElement>(
          '[role="dialog"] [data-action="open-panel"]'
        )!
        .click()
    );
    expect(ran.map(r => r.id)).toEqual([
      CommandIDs.clean,
      CommandIDs.openPanel
    ]);
    expect(gauge.popup).toBeNull();
    act(() => gauge.dispose());
    model.dispose();
  });
});
