/**
 * The graph holders table: variables that keep autograd graphs alive (the
 * `losses.append(loss)` leak) with how many graphs and bytes they keep and a
 * Fix… action, from the rows `graphRows` (src/analysis/memory/graph-holders.ts)
 * computes. Pure: renders its props and reports clicks through a callback.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes, formatPlacement } from '../../analysis/format';
import type { IGraphRow } from '../../analysis/memory/graph-holders';
import { Identifier } from './common';

/**
 * Variables that keep autograd graphs alive (`losses.append(loss)`), with
 * the fix and, where the variable is a plain name holding the tensors itself,
 * a "Fix…" action (it asks before inserting code). One `tr[data-graph]` per
 * variable; the bytes are the agent's estimate (`~`), a lower bound (`≥`)
 * when its walk of the graph stopped early. Renders nothing when there is
 * none.
 */
export function GraphsTable(props: {
  /** The rows, as `graphRows` returns them. */
  graphs: ReadonlyArray<IGraphRow>;
  /** "Fix…" on a variable (its name). */
  onFix: (name: string) => void;
  /** Translations. */
  trans: TranslationBundle;
}): JSX.Element | null {
  const { graphs, trans } = props;
  if (!graphs.length) {
    return null;
  }
  return (
    <>
      <table className="jp-GpuHygiene-table jp-GpuHygiene-graphs">
        <thead>
          <tr>
            <th scope="col">{trans.__('Variable')}</th>
            <th
              scope="col"
              title={trans.__('Tensors with a grad_fn in the variable')}
            >
              {trans.__('Graphs')}
            </th>
            <th
              scope="col"
              title={trans.__(
                'Estimated bytes the graphs keep alive (the tensors and what they saved for backward)'
              )}
            >
              {trans.__('Kept')}
            </th>
            <th scope="col">{trans.__('grad_fn')}</th>
          </tr>
        </thead>
        <tbody>
          {graphs.map(row => (
            <tr
              key={`${row.graph.name}:${row.graph.path}`}
              data-graph={row.graph.name}
            >
              <td className="jp-GpuHygiene-path">
                <Identifier name={row.graph.path} />
              </td>
              <td className="jp-GpuHygiene-nowrap">
                {trans.__('%1 in a %2', row.graph.count, row.graph.container)}
              </td>
              <td
                className="jp-GpuHygiene-nowrap"
                title={
                  row.graph.truncated
                    ? trans.__(
                        '%1; the walk stopped after %2 nodes, so this is a lower bound',
                        formatPlacement(row.graph.bytes, trans),
                        row.graph.nodes
                      )
                    : formatPlacement(row.graph.bytes, trans)
                }
              >
                {row.graph.truncated ? '≥ ' : '~'}
                {formatBytes(row.bytes)}
              </td>
              <td className="jp-GpuHygiene-gradFn">
                <div className="jp-GpuHygiene-state">
                  <Identifier name={row.graph.gradFn} />
                  {row.fixable && (
                    <button
                      className="jp-GpuHygiene-action jp-GpuHygiene-action-fix"
                      data-action="fix"
                      title={trans.__(
                        'Ask, then insert a cell that replaces the tensors in %1 by tensor.detach() (same values, no graph)',
                        row.graph.name
                      )}
                      onClick={() => props.onFix(row.graph.name)}
                    >
                      {trans.__('Fix…')}
                    </button>
                  )}
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="jp-GpuHygiene-note jp-GpuHygiene-graphFix">
        {trans.__(
          'Fix: store loss.item() or loss.detach(), or run evaluation under torch.no_grad().'
        )}
      </div>
    </>
  );
}
