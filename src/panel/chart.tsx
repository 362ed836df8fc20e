/**
 * The memory time series (recharts, in the panel's lazy chunk): device used,
 * this kernel's process, PyTorch reserved and allocated, the two bands that
 * are not live tensors (PyTorch's cache, the CUDA context and libraries), a
 * dashed line at the device total and a marker at each cell; while the
 * running cell's floor climbs, a dashed line from the floor at the fitted
 * rate to where the GPU is full (`projectionLine`), and a mark at each epoch
 * of a followed training (`epochMarks`). At most ~500 points are drawn
 * (min/max per bucket, so peaks stay visible). Without a GPU the same chart
 * draws the kernel process's resident RAM against the RAM it may use.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import {
  CartesianGrid,
  Line,
  LineChart,
  ReferenceArea,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis
} from 'recharts';
import { downsampleMinMax } from '../analysis/memory/downsample';
import { formatBytes, formatTimeLeft } from '../analysis/format';
import {
  ChartRow,
  ICellMarker,
  PERCENT_SERIES,
  SERIES,
  SeriesKey
} from './data';
import type { IEpochMark, IProjectionLine } from './chart-marks';

/** Most points handed to recharts. */
export const MAX_CHART_POINTS = 500;

/**
 * Colours: JupyterLab theme variables (light and dark). Reserved is drawn
 * dashed in the colour of allocated: it is allocated plus PyTorch's cache.
 * The cache (dotted) and the CUDA context (grey) are bands that are not live
 * tensors.
 */
const COLORS: Record<SeriesKey, string> = {
  used: 'var(--jp-brand-color1)',
  process: 'var(--jp-warn-color1)',
  reserved: 'var(--jp-success-color1)',
  allocated: 'var(--jp-success-color1)',
  cached: 'var(--jp-info-color1)',
  nonTorch: 'var(--jp-ui-font-color3)',
  rss: 'var(--jp-brand-color1)',
  utilization: 'var(--jp-accent-color1)',
  processUtilization: 'var(--jp-accent-color1)'
};
const DASHES: Partial<Record<SeriesKey, string>> = {
  reserved: '5 3',
  cached: '2 2',
  nonTorch: '6 2 1 2',
  processUtilization: '3 2'
};

/** A figure of series `key`: bytes, or percent for {@link PERCENT_SERIES}. */
export function formatSeriesValue(
  key: SeriesKey,
  value: number | null
): string {
  if (PERCENT_SERIES.has(key)) {
    return value === null ? '—' : `${Math.round(value)} %`;
  }
  return formatBytes(value);
}

/** Series labels, with where each figure comes from. */
export function seriesLabels(
  trans: TranslationBundle
): Record<SeriesKey, string> {
  return {
    used: trans.__('Device used (NVML)'),
    process: trans.__('This kernel (NVML)'),
    reserved: trans.__('PyTorch reserved'),
    allocated: trans.__('PyTorch allocated (in use by tensors)'),
    cached: trans.__('Cached by PyTorch (free for this kernel)'),
    nonTorch: trans.__('CUDA context and libraries (until restart)'),
    rss: trans.__('This kernel’s RAM (resident)'),
    utilization: trans.__('GPU utilisation (NVML)'),
    processUtilization: trans.__('This kernel’s GPU share (NVML)')
  };
}

/** What each series means, for the legend's tooltips. */
export function seriesHints(
  trans: TranslationBundle
): Record<SeriesKey, string> {
  return {
    used: trans.__('NVML: memory used on the device by all processes'),
    process: trans.__('NVML: this kernel process, including the CUDA context'),
    reserved: trans.__('PyTorch caching allocator: allocated plus its cache'),
    allocated: trans.__('PyTorch: memory of live tensors'),
    cached: trans.__(
      'PyTorch reserved − allocated: free for this kernel, released by empty_cache()'
    ),
    nonTorch: trans.__(
      'This kernel (NVML) − PyTorch reserved: CUDA context, cuBLAS/cuDNN and other libraries; freed only by restarting the kernel'
    ),
    rss: trans.__(
      'The kernel process’s resident set (RSS), the figure jupyter-resource-usage shows: tensors, models and everything else in its RAM'
    ),
    utilization: trans.__(
      'NVML: percent of the time a kernel ran on the device, all processes (nvidia-smi’s GPU-Util); right-hand axis'
    ),
    processUtilization: trans.__(
      'NVML: this kernel process’s share of the device’s streaming multiprocessors since the previous sample; right-hand axis'
    )
  };
}

/** Clock time of a sample, e.g. `14:03:27`. */
export function formatClock(t: number): string {
  const date = new Date(t * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

function lastValue(
  rows: ReadonlyArray<ChartRow>,
  key: SeriesKey
): number | null {
  for (let i = rows.length - 1; i >= 0; i--) {
    const value = rows[i][key];
    if (value !== null) {
      return value;
    }
  }
  return null;
}

/** Tooltip of the chart: time and each figure in MiB/GiB. */
function ChartTooltip(props: {
  active?: boolean;
  payload?: ReadonlyArray<{ dataKey?: unknown; value?: unknown }>;
  label?: unknown;
  total: number | null;
  totalLabel: string;
  labels: Record<SeriesKey, string>;
}): JSX.Element | null {
  const { active, payload, label, labels, total, totalLabel } = props;
  if (!active || !payload?.length) {
    return null;
  }
  return (
    <div className="jp-GpuHygiene-tooltip">
      <div className="jp-GpuHygiene-tooltipTime">
        {typeof label === 'number' ? formatClock(label) : ''}
      </div>
      {payload.map(entry => {
        const key = String(entry.dataKey) as SeriesKey;
        return (
          <div
            key={key}
            className={`jp-GpuHygiene-tooltipRow jp-GpuHygiene-series-${key}`}
          >
            <span className="jp-GpuHygiene-swatch" />
            <span>{labels[key] ?? key}</span>
            <span className="jp-GpuHygiene-value">
              {formatSeriesValue(key, entry.value as number | null)}
            </span>
          </div>
        );
      })}
      {total !== null && (
        <div className="jp-GpuHygiene-tooltipRow">
          <span className="jp-GpuHygiene-swatch jp-GpuHygiene-swatch-total" />
          <span>{totalLabel}</span>
          <span className="jp-GpuHygiene-value">{formatBytes(total)}</span>
        </div>
      )}
    </div>
  );
}

/** Props of {@link VramChart}. */
export interface IVramChartProps {
  /** All rows of the device, oldest first; downsampled here. */
  rows: ReadonlyArray<ChartRow>;
  /** Device total for the dashed line (bytes), or null. */
  total: number | null;
  /** What `total` is, in the legend and tooltip (default: "Device total"). */
  totalLabel?: string;
  /** Cell markers. */
  markers: ReadonlyArray<ICellMarker>;
  /** `device`: the y axis spans the device (0 to total); `data`: zoomed to the figures. */
  scale: 'device' | 'data';
  /** While the running cell's floor climbs: where it leads (dashed), and when the GPU is full. */
  projection?: IProjectionLine | null;
  /** Where each epoch of a followed training began. */
  epochs?: ReadonlyArray<IEpochMark>;
  trans: TranslationBundle;
  /** Fixed size (tests; jsdom has no layout). Default: the panel's width, 220 px high. */
  size?: { width: number; height: number };
}

/**
 * The chart. Pure: renders its props, no model access.
 */
export function VramChart(props: IVramChartProps): JSX.Element {
  const { total, markers, scale, trans, size } = props;
  const totalLabel = props.totalLabel ?? trans.__('Device total');
  const projection = props.projection ?? null;
  const epochs = props.epochs ?? [];
  const data = downsampleMinMax(props.rows, SERIES, MAX_CHART_POINTS);
  const labels = seriesLabels(trans);
  const hints = seriesHints(trans);
  const present = SERIES.filter(key => data.some(row => row[key] !== null));
  const percent = present.some(key => PERCENT_SERIES.has(key));
  const yDomain: [number | string, number | string] =
    scale === 'device' && total !== null ? [0, total] : [0, 'auto'];
  const chart = (
    <LineChart
      data={data as ChartRow[]}
      width={size?.width}
      height={size?.height}
      margin={{ top: 16, right: 8, bottom: 0, left: 0 }}
    >
      <CartesianGrid
        stroke="var(--jp-border-color2)"
        strokeDasharray="3 3"
        vertical={false}
      />
      <XAxis
        dataKey="t"
        type="number"
        scale="time"
        domain={[
          'dataMin',
          projection
            ? (dataMax: number) => Math.max(dataMax, projection.xMax)
            : 'dataMax'
        ]}
        tickFormatter={formatClock}
        stroke="var(--jp-ui-font-color2)"
        tick={{ fill: 'var(--jp-ui-font-color2)', fontSize: 10 }}
        minTickGap={24}
      />
      <YAxis
        domain={yDomain}
        allowDataOverflow={scale === 'device'}
        tickFormatter={(value: number) => formatBytes(value, 0)}
        stroke="var(--jp-ui-font-color2)"
        tick={{ fill: 'var(--jp-ui-font-color2)', fontSize: 10 }}
        width={64}
      />
      {percent && (
        <YAxis
          yAxisId="percent"
          orientation="right"
          domain={[0, 100]}
          allowDataOverflow={true}
          tickFormatter={(value: number) => `${value} %`}
          stroke="var(--jp-ui-font-color2)"
          tick={{ fill: 'var(--jp-ui-font-color2)', fontSize: 10 }}
          width={40}
        />
      )}
      {markers.map(marker =>
        marker.end - marker.t > 0 ? (
          <ReferenceArea
            key={`area-${marker.executionCount}-${marker.t}`}
            x1={marker.t}
            x2={marker.end}
            ifOverflow="hidden"
            fill="var(--jp-layout-color3)"
            fillOpacity={0.4}
            strokeOpacity={0}
          />
        ) : null
      )}
      {markers.map(marker => (
        <ReferenceLine
          key={`cell-${marker.executionCount}-${marker.t}`}
          x={marker.t}
          className="jp-GpuHygiene-cellMarker"
          stroke="var(--jp-ui-font-color3)"
          strokeDasharray="2 2"
          ifOverflow="hidden"
          label={{
            value: `[${marker.executionCount}]`,
            position: 'insideTopLeft',
            fill: 'var(--jp-ui-font-color2)',
            fontSize: 10
          }}
        />
      ))}
      {epochs.map(mark => (
        <ReferenceLine
          key={`epoch-${mark.t}`}
          x={mark.t}
          className="jp-GpuHygiene-epochMarker"
          stroke="var(--jp-ui-font-color3)"
          strokeDasharray="1 3"
          ifOverflow="hidden"
          label={{
            value: trans.__('epoch %1', mark.epoch),
            position: 'insideBottomLeft',
            fill: 'var(--jp-ui-font-color2)',
            fontSize: 9
          }}
        />
      ))}
      {projection && (
        <ReferenceLine
          segment={projection.segment}
          className="jp-GpuHygiene-projection"
          stroke="var(--jp-error-color1)"
          strokeDasharray="4 3"
          strokeWidth={1.5}
          ifOverflow="extendDomain"
          label={{
            value:
              projection.bound === 'limit'
                ? trans.__('cap in ~%1', formatTimeLeft(projection.seconds))
                : trans.__('full in ~%1', formatTimeLeft(projection.seconds)),
            position: 'insideTopRight',
            fill: 'var(--jp-error-color1)',
            fontSize: 10
          }}
        />
      )}
      {projection?.full !== null && projection?.full !== undefined && (
        <ReferenceLine
          x={projection.full}
          className="jp-GpuHygiene-fullMarker"
          stroke="var(--jp-error-color1)"
          strokeDasharray="2 2"
          ifOverflow="extendDomain"
        />
      )}
      {projection?.limit !== null && projection?.limit !== undefined && (
        <ReferenceLine
          y={projection.limit}
          className="jp-GpuHygiene-limitLine"
          stroke="var(--jp-warn-color1)"
          strokeDasharray="6 4"
          ifOverflow={scale === 'device' ? 'extendDomain' : 'hidden'}
          label={{
            value: trans.__('cap %1', formatBytes(projection.limit)),
            position: 'insideTopLeft',
            fill: 'var(--jp-ui-font-color2)',
            fontSize: 10
          }}
        />
      )}
      {total !== null && (
        <ReferenceLine
          y={total}
          className="jp-GpuHygiene-totalLine"
          stroke="var(--jp-error-color1)"
          strokeDasharray="6 4"
          ifOverflow={scale === 'device' ? 'extendDomain' : 'hidden'}
          label={{
            value: trans.__('total %1', formatBytes(total)),
            position: 'insideBottomRight',
            fill: 'var(--jp-ui-font-color2)',
            fontSize: 10
          }}
        />
      )}
      <Tooltip
        isAnimationActive={false}
        content={tooltipProps => (
          <ChartTooltip
            active={tooltipProps.active}
            payload={tooltipProps.payload as any}
            label={tooltipProps.label}
            total={total}
            totalLabel={totalLabel}
            labels={labels}
          />
        )}
      />
      {present.map(key => (
        <Line
          key={key}
          dataKey={key}
          yAxisId={PERCENT_SERIES.has(key) ? 'percent' : 0}
          name={labels[key]}
          className={`jp-GpuHygiene-line jp-GpuHygiene-series-${key}`}
          type="linear"
          stroke={COLORS[key]}
          strokeDasharray={DASHES[key]}
          strokeWidth={1.5}
          dot={false}
          activeDot={{ r: 3 }}
          isAnimationActive={false}
          connectNulls={false}
        />
      ))}
    </LineChart>
  );
  return (
    <div
      className="jp-GpuHygiene-chart"
      data-points={data.length}
      data-samples={props.rows.length}
    >
      {size ? (
        chart
      ) : (
        <ResponsiveContainer width="100%" height={220}>
          {chart}
        </ResponsiveContainer>
      )}
      <ul className="jp-GpuHygiene-legend">
        {present.map(key => {
          const last = lastValue(props.rows, key);
          return (
            <li
              key={key}
              className={`jp-GpuHygiene-series-${key}`}
              title={hints[key]}
            >
              <span className="jp-GpuHygiene-swatch" />
              {labels[key]}
              <span className="jp-GpuHygiene-value">
                {formatSeriesValue(key, last)}
              </span>
            </li>
          );
        })}
        {total !== null && (
          <li>
            <span className="jp-GpuHygiene-swatch jp-GpuHygiene-swatch-total" />
            {totalLabel}
            <span className="jp-GpuHygiene-value">{formatBytes(total)}</span>
          </li>
        )}
      </ul>
    </div>
  );
}
