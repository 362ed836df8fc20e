/**
 * Live CUDA memory by origin (issue 24): Record Allocation Origins (a toggle
 * bound to the `recordOrigins` setting, in the palette, the Kernel menu and
 * the VRAM panel's section) and Go to Origin (the panel's and the findings'
 * links: the cell of an execution count, with the cursor on the line).
 */
import type { NotebookPanel } from '@jupyterlab/notebook';
import { CommandIDs } from '../tokens';
import { originArgs } from './args';
import type { ICommandContext } from './context';

/**
 * The index of the cell of `panel` an origin names: the cell of id `cellId`
 * when the kernel knew it, else the code cell whose execution count is
 * `count` (the last one, should a restart have repeated counts); -1 when
 * none is.
 */
export function cellIndexOf(
  panel: NotebookPanel,
  count: number,
  cellId?: string
): number {
  const cells = panel.content.widgets;
  if (cellId) {
    const byId = cells.findIndex(cell => cell.model.id === cellId);
    if (byId >= 0) {
      return byId;
    }
  }
  for (let i = cells.length - 1; i >= 0; i--) {
    const model = cells[i].model;
    if (
      model.type === 'code' &&
      (model as { executionCount?: number | null }).executionCount === count
    ) {
      return i;
    }
  }
  return -1;
}

/** Register the two commands. */
export function addOriginCommands(ctx: ICommandContext): void {
  const { commands, monitor, trans } = ctx;
  commands.addCommand(CommandIDs.recordOrigins, {
    label: trans.__('Record Allocation Origins'),
    caption: trans.__(
      'Record which notebook cell and line allocated each live CUDA block (PyTorch’s allocation-stack recording; each CUDA allocation costs a little more while it is on)'
    ),
    describedBy: { args: { type: 'object', properties: {} } },
    isToggled: () => monitor.settings.recordOrigins,
    execute: async () => {
      await monitor.setSetting(
        'recordOrigins',
        !monitor.settings.recordOrigins
      );
      commands.notifyCommandChanged(CommandIDs.recordOrigins);
    }
  });
  monitor.settingsChanged.connect(() =>
    commands.notifyCommandChanged(CommandIDs.recordOrigins)
  );
  commands.addCommand(CommandIDs.goToOrigin, {
    label: args =>
      typeof args.cell === 'number'
        ? trans.__('Go to Cell [%1]', args.cell)
        : trans.__('Go to Cell'),
    caption: trans.__(
      'Select the cell whose code allocated this memory, with the cursor on the line'
    ),
    describedBy: originArgs,
    isEnabled: args => {
      const model = ctx.modelFor(args);
      return (
        !!model && !!monitor.panelFor(model) && typeof args.cell === 'number'
      );
    },
    execute: args => {
      const model = ctx.modelFor(args);
      const panel = model ? monitor.panelFor(model) : null;
      if (!panel || typeof args.cell !== 'number') {
        return false;
      }
      const index = cellIndexOf(
        panel,
        args.cell,
        typeof args.cellId === 'string' ? args.cellId : undefined
      );
      if (index < 0) {
        return false;
      }
      const notebook = panel.content;
      notebook.activeCellIndex = index;
      notebook.mode = 'command';
      const cell = notebook.widgets[index];
      void notebook.scrollToItem(index, 'center');
      const editor = cell.editor;
      if (typeof args.line === 'number' && editor) {
        // the cell may have been edited since: never past its last line
        const line = Math.min(Math.max(0, args.line - 1), editor.lineCount - 1);
        editor.setCursorPosition({ line: Math.max(0, line), column: 0 });
      }
      return true;
    }
  });
}
