/**
 * The body of the "What to try…" dialog of the CUDA out-of-memory toast: the
 * figures of the failure, what held the device and the advice (first, when
 * the user's own idle kernels held most of the device, with a Shut down
 * button per kernel). Pure: renders its props (names from the kernel are
 * rendered as text).
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { formatBytes } from './analysis/format';
import type { IOomKernels } from './analysis/processes/oom-idle-kernels';
import { describeHolder, oomHolders } from './analysis/oom/oom-diagnosis';
import { oomAdvice } from './analysis/oom/oom-advice';
import type { IOom } from './protocol';
// Its tables are styled as the VRAM panel's: loaded with the dialog.
import '../style/panel.css';

/** Props of {@link OomDetails}. */
export interface IOomDetailsProps {
  oom: IOom;
  trans: TranslationBundle;
  /** The user's idle kernels among the processes on the device (see `oomIdleKernels`). */
  kernels?: IOomKernels | null;
  /** "Shut down kernel…" on an advice line (a kernel id of the server's answer). */
  onShutDown?: (kernelId: string) => void;
}

/**
 * Figures, holders and advice for one `oom` message. Bytes are shown in IEC
 * units; `n/a` where the message did not carry the figure.
 */
export function OomDetails(props: IOomDetailsProps): JSX.Element {
  const { oom, trans } = props;
  const kernels = props.kernels ?? null;
  const holders = oomHolders(oom, kernels, trans);
  const advice = oomAdvice(oom, trans, kernels);
  const figures: Array<[string, string]> = [
    [trans.__('Error'), `${oom.errorType}: ${oom.message}`],
    [trans.__('Device'), oom.device ?? trans.__('unknown')],
    [trans.__('Tried to allocate'), formatBytes(oom.requested)],
    [
      trans.__('Free on the device'),
      trans.__('%1 of %2', formatBytes(oom.free), formatBytes(oom.total))
    ],
    [
      trans.__('This kernel (NVML)'),
      oom.process === null
        ? trans.__('not listed by NVML')
        : formatBytes(oom.process)
    ],
    [
      trans.__('PyTorch allocated / reserved'),
      `${formatBytes(oom.allocated)} / ${formatBytes(oom.reserved)}`
    ]
  ];
  return (
    <div className="jp-GpuHygiene-oomDetails">
      <table className="jp-GpuHygiene-table jp-GpuHygiene-oomFigures">
        <tbody>
          {figures.map(([label, value]) => (
            <tr key={label}>
              <th scope="row">{label}</th>
              <td>{value}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h4 className="jp-GpuHygiene-subheading">
        {trans.__('What held memory on the device')}
      </h4>
      {holders.length ? (
        <ul className="jp-GpuHygiene-oomHolders">
          {holders.map((holder, i) => (
            <li key={`${holder.kind}-${i}`} data-kind={holder.kind}>
              {describeHolder(holder, trans)}
            </li>
          ))}
        </ul>
      ) : (
        <div className="jp-GpuHygiene-note">
          {trans.__(
            'Nothing stale: no stale model, no traceback, no autograd graph and no other process held memory. The work itself needs more than the GPU has.'
          )}
        </div>
      )}
      <h4 className="jp-GpuHygiene-subheading">{trans.__('What to try')}</h4>
      <ul className="jp-GpuHygiene-oomAdvice">
        {advice.map(item => (
          <li key={item.id} data-advice={item.id}>
            {item.text}
            {props.onShutDown && item.shutDown?.length ? (
              <div className="jp-GpuHygiene-adviceActions">
                {item.shutDown.map(({ kernelId, name }) => (
                  <button
                    key={kernelId}
                    className="jp-GpuHygiene-action jp-GpuHygiene-action-delete"
                    data-action="shutdown"
                    data-kernel-id={kernelId}
                    onClick={() => props.onShutDown?.(kernelId)}
                  >
                    {trans.__('Shut down kernel of %1…', name)}
                  </button>
                ))}
              </div>
            ) : null}
          </li>
        ))}
      </ul>
    </div>
  );
}
