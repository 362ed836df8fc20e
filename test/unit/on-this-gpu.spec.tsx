/**
 * Issue 12 in the views: the gauge's tooltip lines about the rest of the
 * GPU, the VRAM panel's "On this GPU" table and the Shut down kernel…
 * command (the OOM advice: oom-idle-kernels.spec.tsx).
 */
import { textOf } from './dialog-text';
import { InputDialog, Notification, showDialog } from '@jupyterlab/apputils';
import { nullTranslator } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import { fireEvent, render, screen } from '@testing-library/react';
import React from 'react';
import { addCommands } from '../../src/commands';
import { DEFAULT_GPU_PROCESS_SORT } from '../../src/analysis/processes/device-processes';
import { joinGpuProcesses } from '../../src/analysis/processes/gpu-process-join';
import { IGpuProcessesJoin } from '../../src/analysis/processes/gpu-process-types';
import { DEFAULT_HOLDER_SORT } from '../../src/analysis/memory/holders';
import { gpuProcessesOf } from '../../src/other-kernels';
import { panelData } from '../../src/panel/data';
import { GpuProcessesTable } from '../../src/panel/tables/gpu-process-table';
import { PanelContent } from '../../src/panel/view';
import { GpuGauge } from '../../src/statusbar/gauge';
import { GaugeModel } from '../../src/statusbar/gauge-model';
import { gaugeState } from '../../src/statusbar/state';
import { CommandIDs, DEFAULT_SETTINGS } from '../../src/tokens';
import { atSample, gpuSample, OneModelMonitor } from './fixtures';
import { answer, k1Model, monitorWith } from './shared-gpu';

jest.mock('@jupyterlab/apputils', () => {
  const actual = jest.requireActual('@jupyterlab/apputils');
  return {
    ...actual,
    showDialog: jest.fn(),
    InputDialog: { ...actual.InputDialog, getItem: jest.fn() }
  };
});

const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
const GiB = 2 ** 30;
const noop = () => undefined;

describe('gauge tooltip', () => {
  it('adds "Your other kernels" and "Other processes" to the device lines', () => {
    const { model, monitor } = monitorWith();
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      gpuProcessesOf(model, monitor),
      atSample(model)
    );
    expect(state.tooltip).toEqual([
      'NVIDIA H200 (cuda:0)',
      'Device used: 13.0 GiB of 141.0 GiB (NVML, all processes)',
      'This kernel: 700.0 MiB (NVML, includes the CUDA context)',
      'In use by tensors: 40.0 MiB (PyTorch allocated)',
      'Cached by PyTorch: 24.0 MiB — free for this kernel, released by empty_cache()',
      'CUDA context and libraries: 636.0 MiB — freed only by restarting the kernel',
      'Not a leak: most of this kernel’s VRAM is PyTorch’s reusable cache and the CUDA context, not live tensors.',
      'Your other kernels: 8.0 GiB',
      'Other processes: 3.0 GiB (1)',
      'Findings: 1 info',
      'Live models: none'
    ]);
  });

  it('without the server list, the user’s kernels cannot be told apart', () => {
    const model = k1Model();
    const monitor = new OneModelMonitor(model);
    monitor.serverKernels.set({ status: 'missing', at: 0 });
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      gpuProcessesOf(model, monitor),
      atSample(model)
    );
    expect(state.tooltip).toContain(
      'Other processes: 11.0 GiB (2); which are kernels of this server: unknown'
    );
    expect(state.tooltip.join('\n')).not.toContain('Your other kernels');
  });

  it('in a container: one line, attribution unavailable', () => {
    const model = k1Model();
    model.apply({ ...model.gpuProcesses!, namespace: 'container' });
    const { monitor } = monitorWith(model);
    const state = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      gpuProcessesOf(model, monitor),
      atSample(model)
    );
    expect(state.tooltip).toContain(
      'Processes on this GPU: 11.0 GiB (2), attribution unavailable in this container'
    );
    expect(state.tooltip.join('\n')).not.toMatch(
      /Your other kernels|Other processes/
    );
  });

  it('says nothing from a list older than 30 s, or without one', () => {
    const { model, monitor } = monitorWith();
    model.apply({ ...gpuSample(13 * GiB, 141 * GiB, 2), t: 1_764_496_900 });
    const lines = gaugeState(
      model,
      DEFAULT_SETTINGS,
      trans,
      gpuProcessesOf(model, monitor),
      atSample(model)
    ).tooltip.join('\n');
    expect(lines).not.toMatch(/Your other kernels|Other processes/);
    expect(
      gaugeState(model, DEFAULT_SETTINGS, trans).tooltip.join('\n')
    ).not.toMatch(/Other processes/);
  });

  it('the gauge re-renders when the server list arrives', () => {
    const model = k1Model();
    const monitor = new OneModelMonitor(model);
    const gaugeModel = new GaugeModel(monitor);
    let changes = 0;
    gaugeModel.stateChanged.connect(() => void changes++);
    const gauge = new GpuGauge(gaugeModel, trans);
    const title = () => {
      const { container, unmount } = render(gauge.render()!);
      const text = container
        .querySelector('.jp-GpuHygiene-gauge')!
        .getAttribute('title')!;
      unmount();
      return text;
    };
    expect(title()).toContain('which are kernels of this server: unknown');
    monitor.serverKernels.set(answer());
    expect(changes).toBe(1);
    expect(title()).toContain('Your other kernels: 8.0 GiB');
    gauge.dispose();
    expect(gaugeModel.isDisposed).toBe(false);
    gaugeModel.dispose();
    monitor.serverKernels.set(answer());
    expect(changes).toBe(1); // disconnected
  });
});

describe('GpuProcessesTable', () => {
  const join = (): IGpuProcessesJoin => {
    const { model, monitor } = monitorWith();
    return gpuProcessesOf(model, monitor, Date.parse('2025-11-30T10:25:00Z'))!;
  };

  it('lists each process with its bytes; a kernel of this server with its notebook, state, idle time and Shut down kernel…', () => {
    const opened: string[] = [];
    const shut: string[] = [];
    const sorts: unknown[] = [];
    const { container } = render(
      <GpuProcessesTable
        join={join()}
        device="cuda:0"
        server={{ status: 'ok', answer: answer(), at: 0 }}
        sort={DEFAULT_GPU_PROCESS_SORT}
        onSort={s => sorts.push(s)}
        onOpen={p => opened.push(p)}
        onShutDown={id => shut.push(id)}
        shutdownCaption={id => `caption of ${id}`}
        trans={trans}
      />
    );
    const rows = Array.from(
      container.querySelectorAll('tbody tr')
    ) as HTMLElement[];
    expect(rows.map(r => [r.dataset.pid, r.dataset.kind])).toEqual([
      ['2000', 'your-kernel'],
      ['4242', 'other-process'],
      ['1000', 'this-kernel']
    ]);
    const [k2, bob, self] = rows;
    expect(k2.textContent).toContain('k2.ipynb');
    expect(k2.textContent).toContain('8.0 GiB');
    expect(k2.textContent).toContain('idle');
    expect(k2.textContent).toContain('for 25 min');
    expect(k2.querySelector('.jp-GpuHygiene-code')!.textContent).toBe('k2');
    fireEvent.click(k2.querySelector('[data-action="open"]')!);
    expect(opened).toEqual(['work/k2.ipynb']);
    const button = k2.querySelector('[data-action="shutdown"]') as HTMLElement;
    expect(button.textContent).toBe('Shut down kernel…');
    expect(button.title).toBe('caption of k2');
    fireEvent.click(button);
    expect(shut).toEqual(['k2']);
    // Another process: code font name, user, command line cut with the full text on hover.
    expect(bob.textContent).toContain('python3 · bob');
    const cmdline = bob.querySelector('.jp-GpuHygiene-cmdline') as HTMLElement;
    expect(cmdline.title).toMatch(/^python3 train\.py --flag/);
    expect(cmdline.className).toContain('jp-GpuHygiene-code');
    expect(bob.querySelector('[data-action="shutdown"]')).toBeNull();
    // This kernel: never a Shut down button.
    expect(self.textContent).toContain('This kernel');
    expect(self.querySelector('[data-action="shutdown"]')).toBeNull();
    // The pid in code font; sortable headers.
    expect(k2.querySelector('td.jp-GpuHygiene-path')!.textContent).toBe('2000');
    fireEvent.click(container.querySelector('[data-column="pid"]')!);
    expect(sorts).toEqual([{ key: 'pid', direction: 'asc' }]);
    expect(
      container.querySelector('th[aria-sort="descending"]')!.textContent
    ).toContain('VRAM');
  });

  it('marks a kernel past the server’s idle-holding threshold (issue 25), only where the server gives one', () => {
    const table = (idleHolding?: { minutes: number; mib: number }) =>
      render(
        <GpuProcessesTable
          join={join()}
          device="cuda:0"
          server={{
            status: 'ok',
            answer: { ...answer(), ...(idleHolding ? { idleHolding } : {}) },
            at: 0
          }}
          sort={DEFAULT_GPU_PROCESS_SORT}
          onSort={() => undefined}
          onOpen={() => undefined}
          onShutDown={() => undefined}
          trans={trans}
        />
      ).container;
    const flagged = (container: HTMLElement) =>
      Array.from(container.querySelectorAll('[data-idle-holding]')).map(
        badge => (badge.closest('tr') as HTMLElement).dataset.pid
      );
    // k2: idle 25 min, 8 GiB
    expect(flagged(table({ minutes: 20, mib: 256 }))).toEqual(['2000']);
    const badge = table({ minutes: 20, mib: 256 }).querySelector(
      '[data-idle-holding]'
    ) as HTMLElement;
    expect(badge.textContent).toBe('idle, holding VRAM');
    expect(badge.title).toContain('at least 20 min');
    expect(badge.title).toContain('256.0 MiB');
    expect(flagged(table({ minutes: 30, mib: 256 }))).toEqual([]); // not idle long enough
    expect(flagged(table({ minutes: 20, mib: 16384 }))).toEqual([]); // holds less
    expect(flagged(table())).toEqual([]); // an older server: no threshold
  });

  it('says what is missing: no list yet, no process, container, server without the extension', () => {
    const base = {
      device: 'cuda:0',
      server: { status: 'none' as const },
      sort: DEFAULT_GPU_PROCESS_SORT,
      onSort: noop,
      onOpen: noop,
      onShutDown: noop,
      trans
    };
    const { container, rerender } = render(
      <GpuProcessesTable {...base} join={null} />
    );
    expect(
      container.querySelector('[data-kind="no-process-list"]')
    ).not.toBeNull();
    rerender(<GpuProcessesTable {...base} join={join()} device="cuda:5" />);
    expect(
      container.querySelector('[data-kind="no-processes"]')
    ).not.toBeNull();
    const container2 = joinGpuProcesses({
      processes: { ...k1Model().gpuProcesses!, namespace: 'container' },
      kernelId: 'k1',
      server: answer(),
      known: [],
      now: 0
    });
    rerender(<GpuProcessesTable {...base} join={container2} />);
    expect(container.textContent).toContain(
      'Attribution unavailable in this container'
    );
    expect(
      Array.from(container.querySelectorAll('tbody tr')).map(r =>
        r.getAttribute('data-kind')
      )
    ).toEqual(['unattributed', 'unattributed', 'this-kernel']);
    expect(container.querySelector('[data-action="shutdown"]')).toBeNull();
    rerender(
      <GpuProcessesTable
        {...base}
        join={join()}
        server={{ status: 'missing', at: 0 }}
      />
    );
    expect(container.querySelector('[data-note="missing"]')!.textContent).toBe(
      'Kernels of this server: unknown. The server does not answer gpu-hygiene/kernels (its jupyterlab_gpu_hygiene server extension is not enabled, or it is an older install). Kernels open in this browser are still recognised by the pid they report.'
    );
    rerender(
      <GpuProcessesTable
        {...base}
        join={join()}
        server={{
          status: 'error',
          reason: 'http',
          detail: '403 Forbidden',
          at: 0
        }}
      />
    );
    expect(
      container.querySelector('[data-note="error"]')!.textContent
    ).toContain('(HTTP 403 Forbidden)');
  });

  it('is the panel’s "On this GPU" section', () => {
    const { model, monitor } = monitorWith();
    render(
      <PanelContent
        data={panelData(model, DEFAULT_SETTINGS, null)}
        notebook="k1.ipynb"
        settings={DEFAULT_SETTINGS}
        scale="device"
        sort={DEFAULT_HOLDER_SORT}
        onDevice={noop}
        onScale={noop}
        onSort={noop}
        onFree={noop}
        onDelete={noop}
        onThisGpu={{
          join: gpuProcessesOf(model, monitor),
          server: monitor.serverKernels.state,
          sort: DEFAULT_GPU_PROCESS_SORT,
          onSort: noop,
          onOpen: noop,
          onShutDown: noop
        }}
        chartSize={{ width: 400, height: 200 }}
        trans={trans}
      />
    );
    expect(screen.getByText('On this GPU')).toBeTruthy();
    expect(screen.getByText('k2.ipynb')).toBeTruthy();
  });
});

describe('Shut down kernel… command', () => {
  afterEach(() => {
    (showDialog as jest.Mock).mockReset();
    (InputDialog.getItem as jest.Mock).mockReset();
    Notification.dismiss();
  });

  function setup(options: { manager?: boolean } = {}) {
    const { model, monitor } = monitorWith();
    const shutdown = jest.fn(async () => undefined);
    const commands = new CommandRegistry();
    addCommands({
      commands,
      monitor,
      sessionDialogs: null,
      translator: nullTranslator,
      trans,
      ...(options.manager === false ? {} : { kernels: { shutdown } })
    });
    return { model, monitor, commands, shutdown };
  }
  const answerDialog = (accept: boolean) =>
    (showDialog as jest.Mock).mockResolvedValue({
      button: { accept, actions: [] },
      value: null
    });

  it('asks, naming the notebook and the VRAM it frees, then shuts down that kernel id', async () => {
    const { commands, shutdown, monitor } = setup();
    answerDialog(true);
    const args = { kernelId: 'k2' };
    expect(commands.isEnabled(CommandIDs.shutdownKernel, args)).toBe(true);
    expect(commands.caption(CommandIDs.shutdownKernel, args)).toBe(
      'Ask, then shut down the kernel of k2.ipynb: frees 8.0 GiB of VRAM, its variables are lost'
    );
    expect(await commands.execute(CommandIDs.shutdownKernel, args)).toBe(true);
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe('Shut down the kernel of k2.ipynb?');
    expect(textOf(dialog.body)).toBe(
      'The kernel of k2.ipynb (python3, idle) will be shut down: it frees 8.0 GiB of VRAM and all its variables are lost. The notebook file is not changed; start a new kernel to run it again.'
    );
    expect(dialog.buttons.map((b: any) => b.label)).toEqual([
      'Cancel',
      'Shut down'
    ]);
    expect(shutdown).toHaveBeenCalledTimes(1);
    expect(shutdown).toHaveBeenCalledWith('k2');
    // The list was fetched again before the dialog, and after the shutdown.
    expect(monitor.serverKernels.refreshes).toEqual([0, 0]);
  });

  it('cancel shuts nothing down', async () => {
    const { commands, shutdown } = setup();
    answerDialog(false);
    expect(
      await commands.execute(CommandIDs.shutdownKernel, { kernelId: 'k2' })
    ).toBe(false);
    expect(shutdown).not.toHaveBeenCalled();
  });

  it('never for an id the server does not list (a pid, a gone kernel); not without the server list', async () => {
    const { commands, shutdown, monitor } = setup();
    answerDialog(true);
    for (const kernelId of ['2000', 'k9']) {
      expect(commands.isEnabled(CommandIDs.shutdownKernel, { kernelId })).toBe(
        false
      );
      expect(
        await commands.execute(CommandIDs.shutdownKernel, { kernelId })
      ).toBe(false);
    }
    monitor.serverKernels.set({ status: 'missing', at: 0 });
    expect(commands.isEnabled(CommandIDs.shutdownKernel, {})).toBe(false);
    expect(
      await commands.execute(CommandIDs.shutdownKernel, { kernelId: 'k2' })
    ).toBe(false);
    expect(showDialog).not.toHaveBeenCalled();
    expect(shutdown).not.toHaveBeenCalled();
    expect(Notification.manager.notifications.map(n => n.message)).toContain(
      'Shut down kernel: this server does not list its kernels (the jupyterlab_gpu_hygiene server extension is not enabled).'
    );
    const { commands: without } = setup({ manager: false });
    expect(
      without.isEnabled(CommandIDs.shutdownKernel, { kernelId: 'k2' })
    ).toBe(false);
  });

  it('says so when the kernel is the current notebook’s own', async () => {
    const { commands, shutdown } = setup();
    answerDialog(true);
    await commands.execute(CommandIDs.shutdownKernel, { kernelId: 'k1' });
    const dialog = (showDialog as jest.Mock).mock.calls[0][0];
    expect(textOf(dialog.title)).toBe(
      'Shut down this notebook’s own kernel (k1.ipynb)?'
    );
    expect(textOf(dialog.body)).toContain(
      'This is the kernel of the notebook you are working in, k1.ipynb (python3, busy).'
    );
    expect(textOf(dialog.body)).toContain('2.0 GiB of VRAM');
    expect(shutdown).toHaveBeenCalledWith('k1');
  });

  it('from the palette (no kernelId): choose a kernel of the server, largest first, then confirm', async () => {
    const { commands, shutdown } = setup();
    (InputDialog.getItem as jest.Mock).mockImplementation(async options => ({
      button: { accept: true },
      value: options.items[options.current]
    }));
    answerDialog(true);
    await commands.execute(CommandIDs.shutdownKernel, { isPalette: true });
    const picker = (InputDialog.getItem as jest.Mock).mock.calls[0][0];
    expect(picker.items).toEqual([
      'k2.ipynb · idle · 8.0 GiB of VRAM',
      'k1.ipynb · this notebook · busy · 2.0 GiB of VRAM'
    ]);
    expect(picker.current).toBe(0);
    expect(shutdown).toHaveBeenCalledWith('k2');
  });

  it('says what went wrong when the shutdown fails', async () => {
    const { commands, shutdown } = setup();
    shutdown.mockRejectedValueOnce(new Error('Kernel does not exist: k2'));
    answerDialog(true);
    expect(
      await commands.execute(CommandIDs.shutdownKernel, { kernelId: 'k2' })
    ).toBe(false);
    expect(Notification.manager.notifications.map(n => n.message)).toContain(
      'The kernel of k2.ipynb could not be shut down: Kernel does not exist: k2'
    );
  });
});
