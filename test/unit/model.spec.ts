import { GpuKernelModel } from '../../src/model';
import { c01Inventory, gpuSample, oomMessage } from './fixtures';

describe('GpuKernelModel', () => {
  it('keeps a bounded ring buffer of samples, oldest dropped first', () => {
    const model = new GpuKernelModel({ kernelId: 'k', maxSamples: 3 });
    for (let seq = 1; seq <= 5; seq++) {
      model.apply(gpuSample(seq, 10, seq));
    }
    expect(model.samples.map(s => s.seq)).toEqual([3, 4, 5]);
    expect(model.latestSample?.seq).toBe(5);
  });

  it('emits inventoryChanged and changed, and becomes ready on hello', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    const inventories: number[] = [];
    let changes = 0;
    model.inventoryChanged.connect((_, inv) => inventories.push(inv.seq));
    model.changed.connect(() => changes++);
    model.apply(c01Inventory());
    expect(inventories).toEqual([3]);
    expect(changes).toBe(1);
    expect(model.status).toBe('starting');
    model.apply({
      protocol: 2,
      type: 'hello',
      agentVersion: '0.1.0',
      python: '3.11',
      pid: 1,
      torch: null,
      nvml: false,
      nvmlError: null,
      devices: []
    });
    expect(model.status).toBe('ready');
  });

  it('does not emit changed when the status is set to the same value', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    let changes = 0;
    model.changed.connect(() => changes++);
    model.setStatus('dead');
    model.setStatus('dead');
    expect(changes).toBe(1);
  });

  it('forgets the previous kernel process on reset and counts drops', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    model.apply(c01Inventory());
    model.apply(gpuSample(1, 2));
    model.apply({
      protocol: 2,
      type: 'error',
      where: 'sample',
      message: 'IndexError: list index out of range'
    });
    model.countDropped();
    model.resetKernelState();
    expect(model.inventory).toBeNull();
    expect(model.samples).toHaveLength(0);
    expect(model.agentErrors).toEqual([]);
    expect(model.droppedMessages).toBe(1);
  });
});

describe('GpuKernelModel, panel state', () => {
  it('applies a new ring-buffer size at once (the maxSamples setting)', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    expect(model.maxSamples).toBe(3600);
    for (let seq = 1; seq <= 10; seq++) {
      model.apply(gpuSample(seq, 10, seq));
    }
    let changes = 0;
    model.changed.connect(() => changes++);
    model.maxSamples = 4;
    expect(model.samples.map(s => s.seq)).toEqual([7, 8, 9, 10]);
    expect(changes).toBe(1);
    model.maxSamples = 4;
    expect(changes).toBe(1);
    model.apply(gpuSample(11, 10, 11));
    expect(model.samples.map(s => s.seq)).toEqual([8, 9, 10, 11]);
  });

  it('keeps a compact record of each inventory, forgotten on restart', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    model.apply({ ...c01Inventory(), executionCount: null, models: [] });
    model.apply(c01Inventory());
    expect(model.cells.map(c => c.executionCount)).toEqual([null, 3]);
    expect(model.cells[1].models.map(m => m.order)).toEqual([1, 2]);
    expect(model.cells[1].postRun).toBeCloseTo(
      c01Inventory().t - c01Inventory().durationMs / 1000
    );
    model.resetKernelState();
    expect(model.cells).toEqual([]);
  });

  it('bounds the inventory records', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    for (let i = 0; i < GpuKernelModel.MAX_CELLS + 5; i++) {
      model.apply({ ...c01Inventory(), executionCount: i, models: [] });
    }
    expect(model.cells).toHaveLength(GpuKernelModel.MAX_CELLS);
    expect(model.cells[0].executionCount).toBe(5);
  });

  it('keeps the last oom, signals it, and forgets it after a restart', () => {
    const model = new GpuKernelModel({ kernelId: 'k' });
    const seen: Array<number | null> = [];
    model.outOfMemory.connect((_, oom) => seen.push(oom.executionCount));
    model.apply(oomMessage());
    model.apply(oomMessage({ executionCount: 9 }));
    expect(seen).toEqual([7, 9]);
    expect(model.lastOom?.executionCount).toBe(9);
    model.resetKernelState();
    expect(model.lastOom).toBeNull();
  });
});
