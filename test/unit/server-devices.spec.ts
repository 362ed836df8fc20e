/**
 * Between cells an idle kernel's agent is silent (issue 40); the device's
 * figures come from the server's NVML reading (`gpu-hygiene/kernels`'
 * `devices`): the composed sample and list of the GPU's processes
 * (src/server-devices.ts), the model's use of them, and the gauge's note of
 * how old what it shows is.
 */
import { nullTranslator } from '@jupyterlab/translation';
import { GpuKernelModel } from '../../src/model';
import * as composer from '../../src/server-devices';
import {
  ageNotes,
  composeGpuProcesses,
  composeSample,
  isComposed,
  serverSeesKernel
} from '../../src/server-devices';
import { loadServerDevices } from '../../src/server-devices-loader';
import type { IServerDevices } from '../../src/server-kernel-types';
import { gaugeState } from '../../src/statusbar/state';
import { DEFAULT_SETTINGS } from '../../src/tokens';
import { gpuSample, h200Hello } from './fixtures';
import { k1Model } from './shared-gpu';

const GiB = 2 ** 30;
const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/** The server's NVML reading: GPU-1 (the kernel's cuda:0) with `used`, k1 and bob's job. */
function reading(
  used = 20 * GiB,
  uuid = 'GPU-1',
  at = after(5)
): IServerDevices {
  return {
    t: at / 1000,
    error: null,
    devices: [
      {
        uuid,
        index: '0',
        mig: false,
        total: 141 * GiB,
        used,
        utilization: 37,
        processes: [
          { pid: 1000, used: 2 * GiB },
          { pid: 4242, used: 9 * GiB },
          { pid: 5555, used: null }
        ]
      }
    ]
  };
}

/** ms since the epoch, `s` seconds after the fixture's first sample. */
const after = (s: number) => (1_764_496_801 + s) * 1000;

describe('composeSample', () => {
  it('takes the device figures from the server and keeps the kernel’s own', () => {
    const last = gpuSample(13 * GiB, 141 * GiB);
    const sample = composeSample(
      last,
      h200Hello(),
      reading(20 * GiB, 'GPU-1', after(5))
    )!;
    expect(isComposed(sample)).toBe(true);
    expect(sample.t).toBe(last.t + 5);
    expect(sample.ownT).toBe(last.t);
    expect(sample.busy).toBe(false);
    const [device] = sample.devices;
    expect(device.used).toBe(20 * GiB);
    expect(device.utilization).toBe(37);
    // this kernel's figures: its agent's (sent when they change)
    expect(device.process).toBe(last.devices[0].process);
    expect(device.allocated).toBe(last.devices[0].allocated);
    expect(device.reserved).toBe(last.devices[0].reserved);
    // composed again from a composed one: the kernel's report stays the first
    const again = composeSample(
      sample,
      h200Hello(),
      reading(20 * GiB, 'GPU-1', after(6))
    )!;
    expect(again.ownT).toBe(last.t);
  });

  it('composes nothing where the server does not see the kernel’s GPU, while a cell runs, or from an older reading', () => {
    const last = gpuSample(13 * GiB, 141 * GiB);
    expect(
      composeSample(last, h200Hello(), reading(20 * GiB, 'GPU-other', after(5)))
    ).toBeNull();
    expect(
      composeSample(
        { ...last, busy: true },
        h200Hello(),
        reading(20 * GiB, 'GPU-1', after(5))
      )
    ).toBeNull();
    expect(
      composeSample(last, h200Hello(), reading(20 * GiB, 'GPU-1', after(-1)))
    ).toBeNull();
    expect(
      composeSample(
        { ...last, devices: [] },
        h200Hello(),
        reading(20 * GiB, 'GPU-1', after(5))
      )
    ).toBeNull();
  });

  it('knows whether the server reads every device of the kernel', () => {
    expect(serverSeesKernel(h200Hello(), reading())).toBe(true);
    expect(serverSeesKernel(h200Hello(), reading(0, 'GPU-other'))).toBe(false);
    expect(serverSeesKernel(h200Hello(), undefined)).toBe(false);
    expect(serverSeesKernel(null, reading())).toBe(false);
  });
});

describe('composeGpuProcesses', () => {
  it('lists the server’s pids and bytes with what the agent said of each', () => {
    const model = k1Model();
    const listed = composeGpuProcesses(
      model.gpuProcesses,
      model.hello!,
      reading()
    )!;
    const rows = listed.devices[0].processes;
    // largest first, the one without a figure last; k2 (pid 2000) is gone
    expect(rows.map(p => [p.pid, p.used])).toEqual([
      [4242, 9 * GiB],
      [1000, 2 * GiB],
      [5555, null]
    ]);
    expect(rows[0].user).toBe('bob');
    expect(rows[1].self).toBe(true);
    // a process that came since the agent's list: its pid only
    expect(rows[2]).toMatchObject({ name: null, cmdline: null, user: null });
    expect(listed.t).toBe(after(5) / 1000);
  });

  it('composes nothing from another pid namespace’s list', () => {
    const model = k1Model();
    const container = {
      ...model.gpuProcesses!,
      namespace: 'container' as const
    };
    expect(
      composeGpuProcesses(
        container,
        model.hello!,
        reading(20 * GiB, 'GPU-1', after(5))
      )
    ).toBeNull();
    expect(
      composeGpuProcesses(
        null,
        model.hello!,
        reading(20 * GiB, 'GPU-1', after(5))
      )
    ).toBeNull();
  });
});

describe('GpuKernelModel.applyServerReading', () => {
  it('adds a composed sample and list between cells, and says the server sees the kernel', () => {
    const model = k1Model();
    const before = model.samples.length;
    let changes = 0;
    model.changed.connect(() => changes++);
    let listsFromAgent = 0;
    model.gpuProcessesChanged.connect(() => listsFromAgent++);
    model.applyServerReading(reading(20 * GiB, 'GPU-1', after(5)), composer);
    expect(model.samples.length).toBe(before + 1);
    expect(isComposed(model.latestSample!)).toBe(true);
    expect(model.primaryDevice()!.used).toBe(20 * GiB);
    expect(model.serverSeesDevices).toBe(true);
    expect(model.gpuProcesses!.devices[0].processes[0].pid).toBe(4242);
    expect(changes).toBe(1);
    expect(listsFromAgent).toBe(0); // the agent's signal is the agent's
  });

  it('adds nothing before the agent is ready or where the server does not see its GPU', () => {
    const starting = new GpuKernelModel({ kernelId: 'k' });
    starting.applyServerReading(reading(20 * GiB, 'GPU-1', after(5)), composer);
    expect(starting.samples).toEqual([]);
    const model = k1Model();
    const before = model.samples.length;
    model.applyServerReading(reading(0, 'GPU-other', after(5)), composer);
    expect(model.samples.length).toBe(before);
    expect(model.serverSeesDevices).toBe(false);
  });
});

describe('how old the gauge’s figures are', () => {
  it('says nothing right after a sample or while a cell runs', () => {
    const model = k1Model();
    expect(ageNotes(model, after(1), trans)).toEqual([]);
    model.apply({ ...gpuSample(13 * GiB, 141 * GiB, 2), busy: true });
    expect(ageNotes(model, after(600), trans)).toEqual([]);
  });

  it('gives the server’s reading’s age and the kernel’s last report', async () => {
    await loadServerDevices(); // the gauge shows ages once the chunk is there
    const model = k1Model();
    model.applyServerReading(reading(20 * GiB, 'GPU-1', after(90)), composer);
    expect(ageNotes(model, after(93), trans)).toEqual([
      'Device figures read by the server 3 s ago; this kernel’s own as of its last report, 1 min ago (an idle kernel reports only a change).'
    ]);
    const state = gaugeState(model, DEFAULT_SETTINGS, trans, null, after(93));
    expect(state.text).toBe('VRAM 20.0 GiB / 141.0 GiB');
    expect(state.details.notes).toHaveLength(1);
  });

  it('says how old everything is where the server cannot read the kernel’s GPU', () => {
    const model = k1Model();
    model.applyServerReading(reading(0, 'GPU-other', after(1)), composer);
    expect(ageNotes(model, after(5), trans)).toEqual([]);
    expect(ageNotes(model, after(125), trans)).toEqual([
      'Figures as of 2 min ago: an idle kernel reports only a change of its own, and this server cannot read its GPU. Opening this view asked the kernel again.'
    ]);
  });
});
