/**
 * Commands: Clean GPU (insert and run the clear_gpu cell), the VRAM panel's
 * per-row actions (free, delete…, fix a graph holder, drop a finished
 * trainer or DataLoader workers, move a variable's CUDA tensors to the CPU
 * or delete it), Restart kernel (JupyterLab's own restart, with its
 * confirmation) and Shut down kernel… (another kernel of this server that
 * holds the GPU, after a dialog). One module per group; this one only
 * registers them.
 */
import { addCleanCommand } from './clean-gpu';
import { commandContext, type ICommandDeps } from './context';
import { addDetachCommand } from './detach';
import { addInterruptCommand } from './interrupt';
import { addModelCommands } from './model-actions';
import { addOriginCommands } from './go-to-origin';
import { addRestartCommand } from './restart';
import { addShutdownCommand } from './shutdown';
import { addTrainerCommand } from './drop-trainer';
import { addVariableCommands } from './variables';
import { addWorkersCommand } from './drop-workers';

export type { ICommandDeps } from './context';
export { insertCleanCell } from './insert';
export { namesToDelete } from './model-actions';
export { restartReturns } from './restart';
export { trainerOwner } from './drop-trainer';

/**
 * Register the commands.
 */
export function addCommands(deps: ICommandDeps): void {
  const ctx = commandContext(deps);
  addCleanCommand(ctx);
  addModelCommands(ctx);
  addTrainerCommand(ctx);
  addDetachCommand(ctx);
  addWorkersCommand(ctx);
  addVariableCommands(ctx);
  addShutdownCommand(ctx);
  addRestartCommand(ctx);
  addInterruptCommand(ctx);
  addOriginCommands(ctx);
}
