/**
 * The loose tensors table: the largest tensors no model owns, with their
 * path, shape, dtype, device, size and `grad_fn`, as the agent's inventory
 * lists them. Pure: renders its props.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes } from '../../analysis/format';
import { formatShape } from '../../analysis/memory/holders';
import type { ITensorInfo } from '../../protocol';
import { Identifier } from './common';

/**
 * The largest tensors outside any model (≥ 1 MiB, at most 20, as the agent
 * lists them), largest first: one `tr[data-tensor-kind]` each. Renders
 * nothing when there is none.
 */
export function TensorsTable(props: {
  /** The loose tensors of the inventory. */
  tensors: ReadonlyArray<ITensorInfo>;
  /** Translations. */
  trans: TranslationBundle;
}): JSX.Element | null {
  const { tensors, trans } = props;
  if (!tensors.length) {
    return null;
  }
  return (
    <table className="jp-GpuHygiene-table jp-GpuHygiene-tensors">
      <thead>
        <tr>
          <th scope="col">{trans.__('Path')}</th>
          <th scope="col">{trans.__('Tensor')}</th>
          <th scope="col">{trans.__('Size')}</th>
          <th
            scope="col"
            title={trans.__(
              'The autograd function that made it: a tensor with a grad_fn keeps its graph alive'
            )}
          >
            {trans.__('grad_fn')}
          </th>
        </tr>
      </thead>
      <tbody>
        {tensors.map((tensor, i) => (
          <tr key={`${tensor.path}:${i}`} data-tensor-kind={tensor.kind}>
            <td className="jp-GpuHygiene-path">
              <Identifier name={tensor.path} />
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {formatShape(tensor.shape)} {tensor.dtype} {tensor.device}
            </td>
            <td className="jp-GpuHygiene-nowrap">
              {formatBytes(tensor.bytes)}
            </td>
            <td className="jp-GpuHygiene-path">
              {tensor.gradFn ? <Identifier name={tensor.gradFn} /> : '—'}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
