/**
 * jupyterlab-gpu-hygiene: plugin wiring only. The logic lives in the modules
 * imported here.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ISessionContextDialogs } from '@jupyterlab/apputils';
import { IMainMenu } from '@jupyterlab/mainmenu';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- needed at activation
import { addCommands } from './commands';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- needed at activation
import { GpuMonitor } from './monitor';
import { addGaugeToMenuArea } from './notebook7';
// The toasts themselves (rules, texts, findings) load with the first kernel model.
import { NotifierLoader } from './notifications/toast-loader';
// A small shell: the panel itself (views, recharts) loads lazily on first show.
import { GpuPanel } from './panel/shell';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- needed at activation
import { GpuGauge } from './statusbar/gauge';
import { GaugeModel } from './statusbar/gauge-model';
import { DOMAIN, translateSettings } from './i18n';
import { CommandIDs, IGpuMonitor } from './tokens';

const MONITOR_PLUGIN = 'jupyterlab-gpu-hygiene:plugin';

/** The monitor: one model and agent connection per notebook kernel; owns the settings. */
const monitorPlugin: JupyterFrontEndPlugin<IGpuMonitor> = {
  id: MONITOR_PLUGIN,
  description:
    'Sends the GPU hygiene agent to Python kernels and keeps their VRAM figures and model inventory.',
  autoStart: true,
  provides: IGpuMonitor,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    registry: ISettingRegistry | null,
    translator: ITranslator | null
  ): IGpuMonitor => {
    const warned = new Set<string>();
    const monitor = new GpuMonitor({
      tracker,
      serverSettings: app.serviceManager.serverSettings,
      onDropped: (model, reason) => {
        // Logged once per kernel; every drop is counted in the model.
        if (!warned.has(model.kernelId)) {
          warned.add(model.kernelId);
          console.warn(
            `jupyterlab-gpu-hygiene: dropped a malformed message from kernel ${model.kernelId} (${reason}); further drops are only counted.`
          );
        }
      }
    });
    if (registry) {
      // The schema's titles and descriptions in the user's language (src/i18n.ts says why here).
      const trans = (translator ?? nullTranslator).load(DOMAIN);
      translateSettings(registry, MONITOR_PLUGIN, trans);
    }
    void monitor.loadSettings(registry, MONITOR_PLUGIN).catch(reason => {
      console.error('jupyterlab-gpu-hygiene: could not load settings', reason);
    });
    // each kernel's findings for the server's Prometheus metrics (issue 25):
    // its chunk loads with the first kernel, off JupyterLab's start path
    const startReporter = () => {
      monitor.modelAdded.disconnect(startReporter);
      import('./server-findings').then(
        ({ FindingsReporter }) =>
          new FindingsReporter({
            monitor,
            serverSettings: app.serviceManager.serverSettings
          }),
        reason =>
          console.warn(
            'jupyterlab-gpu-hygiene: the findings reporter did not load; the server’s metrics get no findings from this page',
            reason
          )
      );
    };
    monitor.modelAdded.connect(startReporter);
    return monitor;
  }
};

/**
 * The VRAM gauge: in the status bar, or where an application without one
 * has room for it (Notebook 7: the menu bar, beside its kernel status).
 */
const statusbarPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-gpu-hygiene:statusbar',
  description:
    'Shows the current kernel’s VRAM in the status bar (in Notebook 7, which has none: in the menu bar).',
  autoStart: true,
  requires: [IGpuMonitor],
  optional: [IStatusBar, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    monitor: IGpuMonitor,
    statusBar: IStatusBar | null,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(DOMAIN);
    const model = new GaugeModel(monitor);
    // In the status bar a click opens the gauge's popup (breakdown, VRAM
    // panel, Clean GPU); in Notebook 7's menu bar, the VRAM panel.
    const gauge = new GpuGauge(model, trans, {
      commands: app.commands,
      popup: statusBar !== null
    });
    if (!statusBar) {
      addGaugeToMenuArea(app.shell, gauge, model);
      return;
    }
    statusBar.registerStatusItem('jupyterlab-gpu-hygiene:gauge', {
      item: gauge,
      align: 'left',
      rank: 4,
      isActive: () => model.model !== null,
      activeStateChanged: model.stateChanged
    });
  }
};

/** Warning and info toasts. */
const notificationsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-gpu-hygiene:notifications',
  description:
    'Warns when model instances stack up, allocated memory climbs, a cell runs out of CUDA memory or a variable keeps autograd graphs; reports what a clean freed.',
  autoStart: true,
  requires: [IGpuMonitor],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    monitor: IGpuMonitor,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(DOMAIN);
    new NotifierLoader({ monitor, commands: app.commands, trans });
  }
};

/** Clean GPU, Restart kernel and Shut down kernel…: commands, palette and Kernel menu. */
const commandsPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-gpu-hygiene:commands',
  description:
    'Adds the Clean GPU and Restart kernel commands to the palette, Kernel menu and notebook toolbar, and Shut down kernel… (another kernel of this server that holds the GPU) to the palette and the VRAM panel.',
  autoStart: true,
  requires: [IGpuMonitor],
  optional: [ICommandPalette, IMainMenu, ISessionContextDialogs, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    monitor: IGpuMonitor,
    palette: ICommandPalette | null,
    mainMenu: IMainMenu | null,
    sessionDialogs: ISessionContextDialogs | null,
    translator: ITranslator | null
  ) => {
    const resolved = translator ?? nullTranslator;
    const trans = resolved.load(DOMAIN);
    addCommands({
      commands: app.commands,
      monitor,
      sessionDialogs,
      translator: resolved,
      trans,
      kernels: app.serviceManager.kernels
    });
    const category = trans.__('GPU Hygiene');
    for (const command of [
      CommandIDs.clean,
      CommandIDs.restartKernel,
      CommandIDs.shutdownKernel,
      CommandIDs.recordOrigins
    ]) {
      palette?.addItem({ command, category, args: { isPalette: true } });
    }
    mainMenu?.kernelMenu.addGroup(
      [
        { command: CommandIDs.clean },
        { command: CommandIDs.restartKernel },
        { command: CommandIDs.recordOrigins }
      ],
      50
    );
    monitor.currentChanged.connect(() => app.commands.notifyCommandChanged());
  }
};

/** The VRAM panel: right sidebar, palette, View menu; its content loads on first show. */
const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyterlab-gpu-hygiene:panel',
  description:
    'The VRAM panel: time series, per-cell deltas, who holds VRAM, the leak trend of the current kernel and what else is on its GPU.',
  autoStart: true,
  requires: [IGpuMonitor],
  optional: [ICommandPalette, IMainMenu, ILayoutRestorer, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    monitor: IGpuMonitor,
    palette: ICommandPalette | null,
    mainMenu: IMainMenu | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load(DOMAIN);
    let panel = new GpuPanel({ monitor, commands: app.commands, trans });
    app.shell.add(panel, 'right', { rank: 900 });
    restorer?.add(panel, GpuPanel.ID);
    app.commands.addCommand(CommandIDs.openPanel, {
      label: trans.__('VRAM Panel'),
      caption: trans.__(
        'Show the current kernel’s VRAM over time, per-cell allocation, who holds VRAM and the leak trend'
      ),
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => {
        if (panel.isDisposed) {
          panel = new GpuPanel({ monitor, commands: app.commands, trans });
        }
        if (!panel.isAttached) {
          app.shell.add(panel, 'right', { rank: 900 });
        }
        app.shell.activateById(panel.id);
      }
    });
    palette?.addItem({
      command: CommandIDs.openPanel,
      category: trans.__('GPU Hygiene')
    });
    mainMenu?.viewMenu.addGroup([{ command: CommandIDs.openPanel }], 100);
  }
};

export default [
  monitorPlugin,
  statusbarPlugin,
  notificationsPlugin,
  commandsPlugin,
  panelPlugin
];
