/**
 * The roots table: who holds the bytes, one row per root (a variable, the
 * output cache, the last traceback, nothing named), an "unattributed" row and
 * the total, from the summary `rootsSummary` (src/analysis/memory/holders.ts)
 * computes. Pure: renders its props.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes, formatPlacement } from '../../analysis/format';
import type { IRootsSummary } from '../../analysis/memory/holders';
import type { RootKind } from '../../protocol';
import { Identifier } from './common';

/** Label of a root's kind, translated, e.g. `"output cache"`. */
export function rootKindLabel(
  kind: RootKind,
  trans: TranslationBundle
): string {
  switch (kind) {
    case 'variable':
      return trans.__('variable');
    case 'output':
      return trans.__('output cache');
    case 'traceback':
      return trans.__('last traceback');
    case 'hidden':
      return trans.__('nothing named');
  }
}

/**
 * Who holds the bytes: one row per root (every storage counted once), an
 * "unattributed" row for what PyTorch allocated that no root reaches, and
 * the total, which is PyTorch allocated when the inventory was taken. Rows
 * carry `data-root-kind` (and `data-root`, the root's name). Renders nothing
 * when there is neither a root nor an unattributed figure.
 */
export function RootsTable(props: {
  /** The roots, as `rootsSummary` returns them. */
  summary: IRootsSummary;
  /** Translations. */
  trans: TranslationBundle;
}): JSX.Element | null {
  const { summary, trans } = props;
  if (!summary.rows.length && summary.unattributed === null) {
    return null;
  }
  const where = summary.device ?? trans.__('all devices');
  return (
    <table className="jp-GpuHygiene-table jp-GpuHygiene-roots">
      <thead>
        <tr>
          <th scope="col">{trans.__('Root')}</th>
          <th scope="col">{trans.__('Kind')}</th>
          <th scope="col" title={trans.__('Bytes on %1', where)}>
            {summary.device
              ? trans.__('On %1', summary.device)
              : trans.__('Size')}
          </th>
          <th
            scope="col"
            className="jp-GpuHygiene-wrap"
            title={trans.__('Models and loose tensors counted under the root')}
          >
            {trans.__('Models / tensors')}
          </th>
        </tr>
      </thead>
      <tbody>
        {summary.rows.map(row => (
          <tr
            key={`${row.kind}:${row.name}`}
            data-root-kind={row.kind}
            data-root={row.name}
          >
            <td className="jp-GpuHygiene-path">
              <Identifier name={row.name} />
            </td>
            <td>{rootKindLabel(row.kind, trans)}</td>
            <td
              className="jp-GpuHygiene-nowrap"
              title={formatPlacement(row.perDevice, trans)}
            >
              {formatBytes(row.bytes)}
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {row.models} / {row.tensors}
            </td>
          </tr>
        ))}
        {summary.unattributed !== null && (
          <tr data-root-kind="unattributed" className="jp-GpuHygiene-muted">
            <td
              title={trans.__(
                'PyTorch allocated that no root reaches: cuBLAS workspaces, tensors only C++ code or a closed-over frame holds, memory behind a cut walk'
              )}
            >
              {trans.__('unattributed')}
            </td>
            <td>{trans.__('not reachable from a name')}</td>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(summary.unattributed)}
            </td>
            <td />
          </tr>
        )}
      </tbody>
      {summary.device !== null && summary.unattributed !== null && (
        <tfoot>
          <tr data-root-kind="total">
            <th
              scope="row"
              colSpan={2}
              title={trans.__(
                'The roots and the unattributed row add up to PyTorch allocated on %1 when the inventory was taken',
                summary.device
              )}
            >
              {trans.__('PyTorch allocated')}
            </th>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(summary.total)}
            </td>
            <td />
          </tr>
        </tfoot>
      )}
    </table>
  );
}
