import { Signal } from '@lumino/signaling';
import { AgentConnection } from '../../src/connection';
import { GpuKernelModel } from '../../src/model';
import { c08Inventory, oomMessage } from './fixtures';

/** Just enough of a kernel connection: Python, idle, one comm. */
function fakeKernel() {
  const comms: Array<{
    onMsg?: (msg: any) => void;
    opened: unknown[];
    isDisposed: boolean;
  }> = [];
  const kernel = {
    id: 'k',
    status: 'idle',
    isDisposed: false,
    handleComms: true,
    info: Promise.resolve({ language_info: { name: 'python' } }),
    statusChanged: new Signal<any, any>({}),
    connectionStatusChanged: new Signal<any, any>({}),
    requestExecute: () => {
      const future: any = {};
      future.done = Promise.resolve({ content: { status: 'ok' } });
      return future;
    },
    createComm: () => {
      const comm: any = {
        opened: [],
        isDisposed: false,
        open: (data: unknown) => comm.opened.push(data),
        send: () => undefined,
        close: () => {
          comm.isDisposed = true;
        }
      };
      comms.push(comm);
      return comm;
    }
  };
  return { kernel, comms };
}

const hello = {
  protocol: 2,
  type: 'hello',
  agentVersion: '0.2.0',
  python: '3.11.7',
  pid: 42,
  torch: '2.14.1',
  nvml: true,
  nvmlError: null,
  devices: [
    { index: 0, nvmlIndex: 1, name: 'NVIDIA H200', total: 2 ** 37, uuid: null }
  ]
};

describe('AgentConnection validation', () => {
  it('applies protocol 2 messages and drops and counts the others', async () => {
    const { kernel, comms } = fakeKernel();
    const model = new GpuKernelModel({ kernelId: 'k' });
    const dropped: string[] = [];
    const connection = new AgentConnection({
      kernel: kernel as any,
      model,
      sampleIntervalMs: 1000,
      onDropped: (_, reason) => dropped.push(reason)
    });
    for (let i = 0; i < 10 && !comms.length; i++) {
      await new Promise(resolve => setTimeout(resolve, 0));
    }
    const [comm] = comms;
    expect(comm.opened).toEqual([
      {
        protocol: 2,
        type: 'configure',
        sampleIntervalMs: 1000,
        provenance: false
      }
    ]);
    const send = (data: unknown) => comm.onMsg?.({ content: { data } });

    // A version 1 agent: dropped, counted, the model stays as it was.
    send({ ...hello, protocol: 1 });
    expect(model.droppedMessages).toBe(1);
    expect(model.hello).toBeNull();
    expect(dropped[0]).toContain('unsupported protocol version 1');

    send(hello);
    expect(model.status).toBe('ready');
    expect(model.hello?.devices[0].nvmlIndex).toBe(1);

    // A v1-shaped inventory (no roots, graphs...) and a malformed oom are dropped.
    const { roots, graphs, ...v1Shaped } = c08Inventory();
    expect(roots.length + graphs.length).toBeGreaterThan(0);
    send(v1Shaped);
    send({ ...oomMessage(), requested: -5 });
    expect(model.droppedMessages).toBe(3);
    expect(model.inventory).toBeNull();
    expect(model.lastOom).toBeNull();

    // Valid ones are applied and signalled.
    const ooms: number[] = [];
    model.outOfMemory.connect((_, oom) => ooms.push(oom.executionCount ?? -1));
    send(c08Inventory());
    send(oomMessage());
    expect(model.inventory?.graphs[0].name).toBe('val_losses');
    expect(model.lastOom?.requested).toBe(20 * 2 ** 20);
    expect(ooms).toEqual([7]);
    expect(model.droppedMessages).toBe(3);
    connection.dispose();
  });
});
