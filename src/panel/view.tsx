/**
 * The VRAM panel's content (lazy chunk): follows the monitor's current
 * kernel model with `UseSignal` and renders the pure components (the chart,
 * the trend line, the tables of ./tables/).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import { HTMLSelect, UseSignal } from '@jupyterlab/ui-components';
import type { CommandRegistry } from '@lumino/commands';
import React, { useState } from 'react';
import { fixCommand, IFinding } from '../analysis/findings';
import {
  DEFAULT_GPU_PROCESS_SORT,
  IGpuProcessSort
} from '../analysis/processes/device-processes';
import { formatBytes } from '../analysis/format';
import { DEFAULT_HOLDER_SORT, IHolderSort } from '../analysis/memory/holders';
import {
  originsView,
  RECORDING_COST,
  type IRecordingCost,
  type OriginsView
} from '../analysis/memory/origins';
import type { GpuKernelModel } from '../model';
import { gpuProcessesOf } from '../other-kernels';
import { ageNotes } from '../server-devices';
import { CommandIDs, IGpuMonitor, IGpuSettings } from '../tokens';
import { VramChart } from './chart';
import { IPanelData, panelData } from './data';
import { CellTable } from './tables/cell-table';
import { EmptyState } from './tables/common';
import { FindingsTable } from './tables/finding-table';
import {
  GpuProcessesTable,
  IGpuProcessesTableProps
} from './tables/gpu-process-table';
import { GraphsTable } from './tables/graph-table';
import { type OnGo, OriginsSection } from './tables/origin-table';
import { HoldersTable } from './tables/holder-table';
import { RootsTable } from './tables/root-table';
// The views' styles load with them (style/index.css holds what the start path needs).
import '../../style/panel.css';
import { TensorsTable } from './tables/tensor-table';
import { TrendSummary } from './trend';

/** JupyterLab's command that opens a document, or reveals it when it is open. */
const OPEN_DOCUMENT = 'docmanager:open';

/** Props of the panel view. */
export interface IPanelViewProps {
  monitor: IGpuMonitor;
  commands: CommandRegistry;
  trans: TranslationBundle;
}

/** Props of {@link PanelContent}. */
export interface IPanelContentProps {
  data: IPanelData;
  /** Notebook the kernel belongs to, for the heading. */
  notebook: string | null;
  settings: Pick<IGpuSettings, 'leakMinPoints' | 'findingFloorMiB'>;
  scale: 'device' | 'data';
  sort: IHolderSort;
  onDevice: (index: number) => void;
  onScale: (scale: 'device' | 'data') => void;
  onSort: (sort: IHolderSort) => void;
  onFree: (modelId: string) => void;
  onDelete: (modelId: string) => void;
  /** "Fix…" on a graph holder (the variable's name). */
  onFixGraph?: (name: string) => void;
  /** The fix button of a finding. */
  onFix?: (finding: IFinding) => void;
  /** The tooltip of a finding's fix button (its command's caption). */
  fixCaption?: (finding: IFinding) => string;
  /** A link to the cell (execution count) and line an origin names. */
  onOrigin?: OnGo;
  /**
   * The "On this GPU" section (every process NVML lists on the device
   * shown): the table's props but the device and translations; without it,
   * or on a kernel without a GPU, there is no such section.
   */
  onThisGpu?: Omit<IGpuProcessesTableProps, 'device' | 'trans'>;
  /**
   * How old the figures shown are where they are not live (between cells:
   * `ageNotes` of src/statusbar/state.ts); none while a cell runs.
   */
  ageNotes?: string[];
  /**
   * "Live CUDA memory by origin": the agent's provenance for the device
   * shown, the `recordOrigins` setting, its toggle, the cell links and the
   * measured cost of recording; without it, no such section.
   */
  origins?: {
    view: OriginsView;
    on: boolean;
    onToggle: (on: boolean) => void;
    onGo: OnGo;
    cost?: IRecordingCost;
  };
  trans: TranslationBundle;
  /** Fixed chart size (tests). */
  chartSize?: { width: number; height: number };
}

/** What the agent's status means for the panel, when it is not `ready`. */
function statusMessage(
  data: IPanelData,
  trans: TranslationBundle
): string | null {
  switch (data.status) {
    case 'unsupported':
      return trans.__(
        'This notebook’s kernel (%1) is not supported: GPU hygiene watches Python kernels only. Switch the kernel to Python to see its VRAM.',
        data.detail ?? trans.__('unknown language')
      );
    case 'failed':
      return trans.__(
        'The GPU hygiene agent could not start in this kernel: %1. Restart the kernel to try again.',
        data.detail ?? ''
      );
    case 'dead':
      return trans.__('The kernel died. Restart it to measure again.');
    case 'restarting':
      return trans.__(
        'The kernel is restarting; the figures start again when it is ready.'
      );
    case 'starting':
      return trans.__('Waiting for the kernel’s GPU hygiene agent…');
    default:
      return null;
  }
}

/** The panel's heading: the notebook, and the device (a choice where there are several). */
function PanelHeader(props: {
  data: IPanelData;
  notebook: string | null;
  onDevice: (index: number) => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { data, trans } = props;
  const deviceName = data.devices.find(d => d.index === data.device)?.name;
  return (
    <div className="jp-GpuHygiene-panelHeader">
      <span className="jp-GpuHygiene-panelKernel" title={props.notebook ?? ''}>
        {props.notebook ?? trans.__('Current kernel')}
      </span>
      {data.devices.length > 1 ? (
        <HTMLSelect
          className="jp-GpuHygiene-deviceSelect"
          aria-label={trans.__('GPU')}
          value={data.device}
          onChange={event => props.onDevice(Number(event.target.value))}
          options={data.devices.map(d => ({
            value: d.index,
            label: trans.__('cuda:%1 %2', d.index, d.name)
          }))}
        />
      ) : data.gpu && deviceName ? (
        <span className="jp-GpuHygiene-deviceName">
          {trans.__('cuda:%1 %2', data.device, deviceName)}
        </span>
      ) : null}
    </div>
  );
}

/**
 * Why NVML gave no device, from the agent's `nvmlError` (its fixed prefixes,
 * src/agent/gpu_hygiene_agent/devices.py): nvidia-ml-py is missing, the
 * driver (libnvidia-ml) is missing or failed, or NVML lists no device.
 */
export function noGpuCause(
  reason: string | null
): 'no-pynvml' | 'no-driver' | 'no-device' {
  if (reason?.startsWith('nvidia-ml-py (pynvml) not importable')) {
    return 'no-pynvml';
  }
  return reason?.startsWith('NVML initialisation failed')
    ? 'no-driver'
    : 'no-device';
}

/** Why there is no chart: the kernel sees no CUDA device; the raw NVML error under "Details". */
function NoGpuState(props: {
  reason: string | null;
  trans: TranslationBundle;
}): JSX.Element {
  const { reason, trans } = props;
  const cause = noGpuCause(reason);
  return (
    <EmptyState kind="no-gpu">
      <div data-cause={cause}>
        <strong>{trans.__('No GPU visible to this kernel.')}</strong>{' '}
        {cause === 'no-driver'
          ? trans.__(
              'No NVIDIA driver was found, so there is no VRAM to chart. Memory here is CPU RAM.'
            )
          : cause === 'no-pynvml'
            ? trans.__(
                'If the machine has an NVIDIA GPU, install nvidia-ml-py in the kernel’s environment (pip install nvidia-ml-py). Memory here is CPU RAM.'
              )
            : trans.__(
                'The NVIDIA driver lists no device for this kernel (see CUDA_VISIBLE_DEVICES). Memory here is CPU RAM.'
              )}
      </div>
      {reason && (
        <details className="jp-GpuHygiene-noGpuDetails">
          <summary>{trans.__('Details')}</summary>
          <code className="jp-GpuHygiene-code">{reason}</code>
        </details>
      )}
    </EmptyState>
  );
}

/** "VRAM over time": the chart and its zoom, or why there is none yet. */
function ChartSection(
  props: Pick<
    IPanelContentProps,
    'data' | 'scale' | 'onScale' | 'chartSize' | 'trans'
  > & { waiting: boolean }
): JSX.Element {
  const { data, trans } = props;
  return (
    <>
      <h3 className="jp-GpuHygiene-heading">
        {data.gpu || props.waiting
          ? trans.__('VRAM over time')
          : trans.__('Memory over time')}
      </h3>
      {!props.waiting && !data.gpu && (
        <NoGpuState reason={data.noGpuReason} trans={trans} />
      )}
      {props.waiting ? (
        <EmptyState kind="waiting">
          {trans.__('Waiting for the first sample from the kernel…')}
        </EmptyState>
      ) : !data.gpu && !data.rows.some(row => row.rss !== null) ? null : (
        <>
          <div className="jp-GpuHygiene-chartTools">
            <label>
              <input
                type="checkbox"
                checked={props.scale === 'data'}
                onChange={event =>
                  props.onScale(event.target.checked ? 'data' : 'device')
                }
              />{' '}
              {trans.__('Zoom to the figures')}
            </label>
          </div>
          <VramChart
            rows={data.rows}
            total={data.total}
            totalLabel={data.gpu ? undefined : trans.__('RAM it may use')}
            markers={data.markers}
            projection={data.projection}
            epochs={data.epochs}
            scale={props.scale}
            trans={trans}
            size={props.chartSize}
          />
        </>
      )}
    </>
  );
}

/**
 * "Who holds VRAM" ("Who holds memory" without CUDA figures: the bytes are
 * then CPU RAM): the roots, the models' holders, the largest tensors and the
 * graph holders.
 */
function HoldersSection(
  props: Pick<
    IPanelContentProps,
    'data' | 'sort' | 'onSort' | 'onFree' | 'onDelete' | 'onFixGraph' | 'trans'
  >
): JSX.Element {
  const { data, trans } = props;
  return (
    <>
      <h3 className="jp-GpuHygiene-heading">
        {data.gpu ? trans.__('Who holds VRAM') : trans.__('Who holds memory')}
      </h3>
      {data.roots && <RootsTable summary={data.roots} trans={trans} />}
      <HoldersTable
        rows={data.holders}
        sort={props.sort}
        onSort={props.onSort}
        onFree={props.onFree}
        onDelete={props.onDelete}
        truncated={data.truncated}
        trans={trans}
      />
      {data.tensors.length > 0 && (
        <>
          <h4 className="jp-GpuHygiene-subheading">
            {trans.__('Largest tensors outside models')}
          </h4>
          <TensorsTable tensors={data.tensors} trans={trans} />
        </>
      )}
      {data.graphs.length > 0 && (
        <>
          <h4 className="jp-GpuHygiene-subheading">
            {trans.__('Variables that keep autograd graphs alive')}
          </h4>
          <GraphsTable
            graphs={data.graphs}
            onFix={props.onFixGraph ?? (() => undefined)}
            trans={trans}
          />
        </>
      )}
    </>
  );
}

/**
 * The findings: those at or above the floor (`findingFloorMiB`), then a
 * button (`data-action="show-small-findings"`) that lists those below it
 * (`ul.jp-GpuHygiene-smallFindings`) until pressed again. Renders nothing
 * without a finding.
 */
export function FindingsSection(props: {
  /** Findings at or above the floor, largest first. */
  findings: ReadonlyArray<IFinding>;
  /** Findings below the floor, largest first. */
  small: ReadonlyArray<IFinding>;
  /** The floor, MiB. */
  floorMiB: number;
  onFix: (finding: IFinding) => void;
  captionOf?: (finding: IFinding) => string;
  onOrigin?: OnGo;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { findings, small, trans } = props;
  const [showSmall, setShowSmall] = useState(false);
  if (!findings.length && !small.length) {
    return null;
  }
  const floor = formatBytes(Math.max(0, props.floorMiB) * 2 ** 20);
  return (
    <>
      <h3 className="jp-GpuHygiene-heading">{trans.__('Findings')}</h3>
      <FindingsTable
        findings={findings}
        onFix={props.onFix}
        captionOf={props.captionOf}
        onOrigin={props.onOrigin}
        trans={trans}
      />
      {small.length > 0 && (
        <button
          type="button"
          className="jp-GpuHygiene-action jp-GpuHygiene-showSmall"
          data-action="show-small-findings"
          aria-expanded={showSmall}
          onClick={() => setShowSmall(!showSmall)}
        >
          {showSmall
            ? trans._n(
                'Hide %1 finding under %2',
                'Hide %1 findings under %2',
                small.length,
                floor
              )
            : trans._n(
                'Show %1 finding under %2',
                'Show %1 findings under %2',
                small.length,
                floor
              )}
        </button>
      )}
      {showSmall && small.length > 0 && (
        <div className="jp-GpuHygiene-smallFindings">
          <FindingsTable
            findings={small}
            onFix={props.onFix}
            captionOf={props.captionOf}
            onOrigin={props.onOrigin}
            trans={trans}
          />
        </div>
      )}
    </>
  );
}

/**
 * The panel for one kernel. Pure: renders its props.
 */
export function PanelContent(props: IPanelContentProps): JSX.Element {
  const { data, trans } = props;
  const status = statusMessage(data, trans);
  // No sample yet: the kernel is starting, restarting, or just answered.
  const waiting = data.rows.length === 0;
  if (
    status &&
    (waiting || (data.status !== 'starting' && data.status !== 'restarting'))
  ) {
    return <EmptyState kind={data.status}>{status}</EmptyState>;
  }
  return (
    <div className="jp-GpuHygiene-panelContent" data-status={data.status}>
      <PanelHeader
        data={data}
        notebook={props.notebook}
        onDevice={props.onDevice}
        trans={trans}
      />
      {status && <EmptyState kind={data.status}>{status}</EmptyState>}
      {(props.ageNotes ?? []).map((note, i) => (
        <p key={i} className="jp-GpuHygiene-panelAge">
          {note}
        </p>
      ))}
      <FindingsSection
        findings={data.findings}
        small={data.smallFindings}
        floorMiB={props.settings.findingFloorMiB}
        onFix={props.onFix ?? (() => undefined)}
        captionOf={props.fixCaption}
        onOrigin={props.onOrigin}
        trans={trans}
      />
      <ChartSection {...props} waiting={waiting} />
      <TrendSummary
        trend={data.trend}
        gpu={data.gpu || waiting}
        cells={data.cells.length}
        minPoints={props.settings.leakMinPoints}
        runningCell={data.runningCell}
        trans={trans}
      />
      <HoldersSection {...props} />
      {props.origins && (data.gpu || props.origins.view.state !== 'off') && (
        <OriginsSection
          {...props.origins}
          device={`cuda:${data.device}`}
          trans={trans}
        />
      )}
      {props.onThisGpu && (data.gpu || props.onThisGpu.join) && (
        <>
          <h3 className="jp-GpuHygiene-heading">{trans.__('On this GPU')}</h3>
          <GpuProcessesTable
            {...props.onThisGpu}
            device={`cuda:${data.device}`}
            trans={trans}
          />
        </>
      )}
      <h3 className="jp-GpuHygiene-heading">{trans.__('Cells')}</h3>
      <CellTable
        cells={data.cells}
        epochs={data.cellEpochs}
        gpu={data.gpu}
        trans={trans}
      />
    </div>
  );
}

/** The panel's actions on the kernel `kernelId`: each runs (or captions) its command. */
function kernelActions(
  commands: CommandRegistry,
  kernelId: string
): Pick<
  IPanelContentProps,
  'onFree' | 'onDelete' | 'onFixGraph' | 'fixCaption' | 'onFix' | 'onOrigin'
> {
  return {
    onFree: modelId =>
      void commands.execute(CommandIDs.freeModel, { kernelId, modelId }),
    onDelete: modelId =>
      void commands.execute(CommandIDs.deleteModel, { kernelId, modelId }),
    onFixGraph: name =>
      void commands.execute(CommandIDs.fixGraphHolder, { kernelId, name }),
    fixCaption: finding => {
      const command = fixCommand(finding.fix, kernelId);
      return command ? commands.caption(command.id, command.args) : '';
    },
    onFix: finding => {
      const command = fixCommand(finding.fix, kernelId);
      if (command) {
        void commands.execute(command.id, command.args);
      }
    },
    onOrigin: (cell, line, cellId) =>
      void commands.execute(CommandIDs.goToOrigin, {
        kernelId,
        cell,
        ...(line !== null ? { line } : {}),
        ...(cellId !== null ? { cellId } : {})
      })
  };
}

/** The "On this GPU" section's props for `model`: the join, the server's state, and its commands. */
function onThisGpuProps(
  model: GpuKernelModel,
  monitor: IGpuMonitor,
  commands: CommandRegistry,
  sort: IGpuProcessSort,
  onSort: (sort: IGpuProcessSort) => void
): NonNullable<IPanelContentProps['onThisGpu']> {
  return {
    join: gpuProcessesOf(model, monitor),
    server: monitor.serverKernels.state,
    sort,
    onSort,
    onOpen: path => {
      if (commands.hasCommand(OPEN_DOCUMENT)) {
        void commands.execute(OPEN_DOCUMENT, { path });
      }
    },
    onShutDown: id =>
      void commands.execute(CommandIDs.shutdownKernel, { kernelId: id }),
    shutdownCaption: id =>
      commands.hasCommand(CommandIDs.shutdownKernel)
        ? commands.caption(CommandIDs.shutdownKernel, { kernelId: id })
        : ''
  };
}

/** The "Live CUDA memory by origin" section's props for `model`. */
function originsProps(
  model: GpuKernelModel,
  monitor: IGpuMonitor,
  commands: CommandRegistry,
  on: boolean,
  device: number | null
): NonNullable<IPanelContentProps['origins']> {
  return {
    view: originsView(model.inventory, device ?? 0),
    on,
    onToggle: value => void monitor.setSetting('recordOrigins', value),
    onGo: (cell, line, cellId) =>
      void commands.execute(CommandIDs.goToOrigin, {
        kernelId: model.kernelId,
        cell,
        ...(line !== null ? { line } : {}),
        ...(cellId !== null ? { cellId } : {})
      }),
    cost: RECORDING_COST
  };
}

/** The panel for one kernel model: keeps the view state, re-renders on change. */
function KernelView(props: {
  model: GpuKernelModel;
  monitor: IGpuMonitor;
  commands: CommandRegistry;
  trans: TranslationBundle;
}): JSX.Element {
  const { model, monitor, commands, trans } = props;
  const [device, setDevice] = useState<number | null>(null);
  const [scale, setScale] = useState<'device' | 'data'>('device');
  const [sort, setSort] = useState<IHolderSort>(DEFAULT_HOLDER_SORT);
  const [processSort, setProcessSort] = useState<IGpuProcessSort>(
    DEFAULT_GPU_PROCESS_SORT
  );
  return (
    <UseSignal signal={monitor.settingsChanged} initialArgs={monitor.settings}>
      {(_, settings) => (
        <UseSignal signal={monitor.serverKernels.changed}>
          {() => (
            <UseSignal signal={model.changed}>
              {() => (
                <PanelContent
                  data={panelData(
                    model,
                    settings ?? monitor.settings,
                    device,
                    sort
                  )}
                  notebook={monitor.panelFor(model)?.title.label ?? null}
                  ageNotes={ageNotes(model, Date.now(), trans)}
                  settings={settings ?? monitor.settings}
                  scale={scale}
                  sort={sort}
                  onDevice={setDevice}
                  onScale={setScale}
                  onSort={setSort}
                  {...kernelActions(commands, model.kernelId)}
                  onThisGpu={onThisGpuProps(
                    model,
                    monitor,
                    commands,
                    processSort,
                    setProcessSort
                  )}
                  origins={originsProps(
                    model,
                    monitor,
                    commands,
                    (settings ?? monitor.settings).recordOrigins,
                    device
                  )}
                  trans={trans}
                />
              )}
            </UseSignal>
          )}
        </UseSignal>
      )}
    </UseSignal>
  );
}

/**
 * The panel view: the current notebook's kernel, followed through
 * `IGpuMonitor.currentChanged`.
 */
export default function PanelView(props: IPanelViewProps): JSX.Element {
  const { monitor, commands, trans } = props;
  return (
    <UseSignal
      signal={monitor.currentChanged}
      initialArgs={monitor.currentModel}
    >
      {(_, model) =>
        model ? (
          <KernelView
            key={model.kernelId}
            model={model}
            monitor={monitor}
            commands={commands}
            trans={trans}
          />
        ) : (
          <EmptyState kind="no-kernel">
            {trans.__(
              'Open a notebook with a Python kernel: this panel shows its VRAM over time, what each cell allocated, who holds VRAM and whether allocated memory keeps climbing.'
            )}
          </EmptyState>
        )
      }
    </UseSignal>
  );
}
