/**
 * Issue 12 and CUDA out of memory: when the user's own idle kernels held
 * most of the failed device, the first advice line says so with a Shut down
 * action, in the "What to try…" dialog and on the toast.
 */
import { Notification, showDialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { fireEvent, render } from '@testing-library/react';
import React from 'react';
import { oomAdvice } from '../../src/analysis/oom/oom-advice';
import { GpuNotifier } from '../../src/notifications';
import { OomDetails } from '../../src/oom-details';
import { oomKernelsOf } from '../../src/other-kernels';
import { CommandIDs } from '../../src/tokens';
import { oomMessage } from './fixtures';
import { monitorWith } from './shared-gpu';

jest.mock('@jupyterlab/apputils', () => ({
  ...jest.requireActual('@jupyterlab/apputils'),
  showDialog: jest.fn()
}));

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const GiB = 2 ** 30;
const MiB = 2 ** 20;

describe('OOM on a device held by the user’s idle kernels', () => {
  afterEach(() => {
    Notification.dismiss();
    (showDialog as jest.Mock).mockReset();
  });
  const oom = () =>
    oomMessage({
      total: 80 * GiB,
      free: 2 * MiB,
      process: 20 * GiB,
      processes: [
        { pid: 2000, used: 50 * GiB },
        { pid: 4242, used: 6 * GiB }
      ]
    });

  it('the first advice line says so, names the kernel and offers to shut it down', () => {
    const { model, monitor } = monitorWith();
    const kernels = oomKernelsOf(model, oom(), monitor);
    const advice = oomAdvice(oom(), trans, kernels);
    expect(advice[0].id).toBe('idle-kernels');
    expect(advice[0].text).toBe(
      'Your own idle kernel holds 50.0 GiB of the 80.0 GiB in use on this GPU: k2.ipynb (50.0 GiB, idle). Shut it down to free that memory (its variables are lost).'
    );
    expect(advice[0].shutDown).toEqual([{ kernelId: 'k2', name: 'k2.ipynb' }]);
    // The other processes' advice no longer counts the idle kernel.
    expect(advice.find(a => a.id === 'processes')!.text).toContain(
      '6.0 GiB of this GPU (pid 4242)'
    );
    // Not mostly: no such line.
    const small = oomMessage({
      total: 80 * GiB,
      free: 0,
      processes: [{ pid: 2000, used: 10 * GiB }]
    });
    expect(
      oomAdvice(small, trans, oomKernelsOf(model, small, monitor)).map(
        a => a.id
      )
    ).not.toContain('idle-kernels');
  });

  it('the dialog lists the kernel and its Shut down button', () => {
    const { model, monitor } = monitorWith();
    const shut: string[] = [];
    const { container } = render(
      <OomDetails
        oom={oom()}
        trans={trans}
        kernels={oomKernelsOf(model, oom(), monitor)}
        onShutDown={id => shut.push(id)}
      />
    );
    expect(container.textContent).toContain(
      'your idle kernel of k2.ipynb (pid 2000) 50.0 GiB'
    );
    const first = container.querySelector('[data-advice]') as HTMLElement;
    expect(first.dataset.advice).toBe('idle-kernels');
    const button = first.querySelector('[data-action="shutdown"]')!;
    expect(button.textContent).toBe('Shut down kernel of k2.ipynb…');
    fireEvent.click(button);
    expect(shut).toEqual(['k2']);
  });

  it('the toast offers Shut down idle kernel… first, running the command with that kernel id', () => {
    const { model, monitor } = monitorWith();
    const commands = new CommandRegistry();
    const calls: Array<[string, unknown]> = [];
    for (const id of [
      CommandIDs.shutdownKernel,
      CommandIDs.clean,
      CommandIDs.restartKernel
    ]) {
      commands.addCommand(id, { execute: args => void calls.push([id, args]) });
    }
    const notifier = new GpuNotifier({ monitor, commands, trans });
    model.apply(oom());
    const toast = Notification.manager.notifications.find(
      n => n.type === 'error'
    )!;
    expect(toast.message).toContain('your idle kernel 50.0 GiB');
    const actions = toast.options.actions ?? [];
    expect(actions.map(a => a.label)).toEqual([
      'Shut down idle kernel…',
      'Clean GPU',
      'Restart kernel',
      'What to try…'
    ]);
    actions[0].callback(new MouseEvent('click'));
    expect(calls).toEqual([[CommandIDs.shutdownKernel, { kernelId: 'k2' }]]);
    (showDialog as jest.Mock).mockResolvedValue({ button: { accept: false } });
    actions[3].callback(new MouseEvent('click'));
    const body = (showDialog as jest.Mock).mock.calls[0][0].body;
    expect(body.props.kernels.kernels[0].kernel.id).toBe('k2');
    notifier.dispose();
  });
});
