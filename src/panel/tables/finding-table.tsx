/**
 * The findings list at the top of the VRAM panel: every finding of the
 * kernel (`src/analysis/findings/`), largest first, each with its severity,
 * subject, bytes (and, apart, the bytes it shares with another holder:
 * "+ 12.0 MiB shared with last"), one-line explanation, evidence and its fix
 * button. Pure:
 * renders its props and reports clicks through a callback.
 */
import type { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';
import { fixLabel, IFinding } from '../../analysis/findings';
import {
  formatBytes,
  formatPlacement,
  listNames,
  sumBytes
} from '../../analysis/format';
import { type OnGo, OriginLink } from './origin-table';

/**
 * One `li[data-finding]` per finding (`data-kind`, `data-severity`), with the
 * evidence in code font (cut with an ellipsis, the full text on hover) and,
 * where a command can fix it, a button (`data-action="fix"`) whose label
 * says what it does; a finding no command fixes says so instead. Renders
 * nothing when there is no finding.
 */
export function FindingsTable(props: {
  /** The findings, as `findings()` sorts them (largest first). */
  findings: ReadonlyArray<IFinding>;
  /** The fix button of a finding was clicked. */
  onFix: (finding: IFinding) => void;
  /** The tooltip of a finding's fix button: its command's caption (default none). */
  captionOf?: (finding: IFinding) => string;
  /** A finding's origin link was clicked: the cell (execution count), line and cell id. */
  onOrigin?: OnGo;
  /** Translations. */
  trans: TranslationBundle;
}): JSX.Element | null {
  const { findings, trans } = props;
  if (!findings.length) {
    return null;
  }
  return (
    <ul className="jp-GpuHygiene-findings">
      {findings.map(finding => {
        const label = fixLabel(finding.fix, trans);
        const evidence = finding.evidence.join(', ');
        return (
          <li
            key={finding.id}
            className="jp-GpuHygiene-finding"
            data-finding={finding.id}
            data-kind={finding.kind}
            data-severity={finding.severity}
          >
            <div className="jp-GpuHygiene-findingHead">
              <span className="jp-GpuHygiene-findingSeverity">
                {finding.severity === 'warning'
                  ? trans.__('Warning')
                  : trans.__('Info')}
              </span>
              <span
                className="jp-GpuHygiene-findingSubject"
                title={finding.subject}
              >
                {finding.subject}
              </span>
              <span
                className="jp-GpuHygiene-findingBytes jp-GpuHygiene-nowrap"
                title={formatPlacement(finding.bytes, trans)}
              >
                {formatBytes(sumBytes(finding.bytes))}
              </span>
              {finding.sharedBytes && sumBytes(finding.sharedBytes) > 0 && (
                <span
                  className="jp-GpuHygiene-findingShared jp-GpuHygiene-nowrap"
                  title={formatPlacement(finding.sharedBytes, trans)}
                >
                  {finding.sharedWith?.length
                    ? trans.__(
                        '+ %1 shared with %2',
                        formatBytes(sumBytes(finding.sharedBytes)),
                        listNames(finding.sharedWith, 2, trans)
                      )
                    : trans.__(
                        '+ %1 shared',
                        formatBytes(sumBytes(finding.sharedBytes))
                      )}
                </span>
              )}
              {label !== null ? (
                <button
                  className="jp-GpuHygiene-action"
                  data-action="fix"
                  title={props.captionOf?.(finding) || undefined}
                  onClick={() => props.onFix(finding)}
                >
                  {label}
                </button>
              ) : (
                <span className="jp-GpuHygiene-findingNoFix">
                  {trans.__('No fix from here')}
                </span>
              )}
            </div>
            <div className="jp-GpuHygiene-findingText">
              {finding.explain(trans)}
            </div>
            {evidence && (
              <div className="jp-GpuHygiene-findingEvidence" title={evidence}>
                {evidence}
              </div>
            )}
            {finding.origins?.length ? (
              <div className="jp-GpuHygiene-findingOrigins">
                {trans.__('Where its memory was allocated:')}{' '}
                {finding.origins.map((origin, i) => (
                  <span key={origin.key} data-origin-cell={origin.cell ?? ''}>
                    {i > 0 ? ', ' : ''}
                    <OriginLink
                      row={origin}
                      onGo={props.onOrigin ?? (() => undefined)}
                      trans={trans}
                    />
                    {origin.text ? (
                      <>
                        {' '}
                        <code title={origin.text}>{origin.text}</code>
                      </>
                    ) : null}{' '}
                    <span className="jp-GpuHygiene-nowrap">
                      (
                      {origin.shared > 0
                        ? trans.__(
                            '%1, %2 of it also kept by another holder',
                            formatBytes(origin.held),
                            formatBytes(origin.shared)
                          )
                        : formatBytes(origin.held)}
                      )
                    </span>
                  </span>
                ))}
              </div>
            ) : null}
          </li>
        );
      })}
    </ul>
  );
}
