import { nullTranslator } from '@jupyterlab/translation';
import { render, screen } from '@testing-library/react';
import React from 'react';
import { GpuKernelModel } from '../../src/model';
import { GaugeComponent } from '../../src/statusbar/gauge';
import { gaugeState, levelOf } from '../../src/statusbar/state';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { c01Inventory, gpuSample } from './fixtures';

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const GiB = 2 ** 30;

function readyModel(): GpuKernelModel {
  const model = new GpuKernelModel({ kernelId: 'k1' });
  model.apply({
    protocol: 1,
    type: 'hello',
    agentVersion: '0.1.0',
    python: '3.11.7',
    pid: 1,
    torch: '2.14.1',
    nvml: true,
    nvmlError: null,
    devices: [
      { index: 0, name: 'NVIDIA H200', total: 141 * GiB, uuid: 'GPU-1' }
    ]
  });
  return model;
}

describe('levelOf', () => {
  it('changes colour at the settings thresholds', () => {
    expect(levelOf(0.5, DEFAULT_SETTINGS)).toBe('ok');
    expect(levelOf(0.75, DEFAULT_SETTINGS)).toBe('warn');
    expect(levelOf(0.95, DEFAULT_SETTINGS)).toBe('critical');
  });
});

describe('gaugeState', () => {
  it('shows used / total with the breakdown in the tooltip', () => {
    const model = readyModel();
    model.apply(gpuSample(120 * GiB, 141 * GiB));
    model.apply(c01Inventory());
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.kind).toBe('gpu');
    expect(state.text).toBe('VRAM 120.0 GiB / 141.0 GiB');
    expect(state.level).toBe('warn');
    expect(state.fraction).toBeCloseTo(120 / 141);
    expect(state.tooltip).toEqual([
      'NVIDIA H200 (cuda:0)',
      'Device used: 120.0 GiB of 141.0 GiB (NVML, all processes)',
      'This kernel: 700.0 MiB (NVML, includes the CUDA context)',
      'PyTorch reserved: 64.0 MiB (caching allocator)',
      'PyTorch allocated: 40.0 MiB (live tensors)',
      'Live models: 2 (1 stale)'
    ]);
  });

  it('says "No GPU" and still counts models and their RAM', () => {
    const model = new GpuKernelModel({ kernelId: 'k2' });
    model.apply({
      protocol: 1,
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
    model.apply(c01Inventory());
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.kind).toBe('no-gpu');
    expect(state.text).toBe('No GPU · 2 models (24.2 MiB RAM)');
    expect(state.tooltip[0]).toBe(
      'VRAM not measurable: NVML Shared Library Not Found'
    );
    expect(state.fraction).toBeNull();
  });

  it('says when the kernel is not supported, dead or restarting', () => {
    const model = new GpuKernelModel({ kernelId: 'k3' });
    model.setStatus('unsupported', 'R');
    expect(gaugeState(model, DEFAULT_SETTINGS, trans).text).toBe(
      'GPU hygiene: kernel not supported'
    );
    model.setStatus('dead');
    expect(gaugeState(model, DEFAULT_SETTINGS, trans).kind).toBe('dead');
    model.setStatus('restarting');
    expect(gaugeState(model, DEFAULT_SETTINGS, trans).kind).toBe('restarting');
  });

  it('says when NVML does not list the kernel process', () => {
    const model = readyModel();
    const sample = gpuSample(GiB, 141 * GiB);
    sample.devices[0].process = null;
    model.apply(sample);
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(state.tooltip[2]).toBe(
      'This kernel: not listed by NVML (no CUDA context yet, or the kernel’s container hides its pid)'
    );
  });

  it('lists agent errors once in the tooltip', () => {
    const model = readyModel();
    const error = {
      protocol: 1 as const,
      type: 'error' as const,
      where: 'nvml' as const,
      message: 'Driver Not Loaded'
    };
    model.apply(error);
    model.apply(error);
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    expect(
      state.tooltip.filter(l => l.includes('Driver Not Loaded'))
    ).toHaveLength(1);
  });
});

describe('GaugeComponent', () => {
  it('renders text, tooltip, level and bar width', () => {
    const model = readyModel();
    model.apply(gpuSample(135 * GiB, 141 * GiB));
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
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
    const state = gaugeState(model, DEFAULT_SETTINGS, trans);
    state.text = '<img src=x onerror=alert(1)>';
    const { container } = render(<GaugeComponent state={state} />);
    expect(container.querySelector('img')).toBeNull();
    expect(screen.getByText('<img src=x onerror=alert(1)>')).toBeTruthy();
  });
});
