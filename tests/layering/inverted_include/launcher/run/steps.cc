// Fixture: a run/ file that includes a CLI header (the inversion #15 found in run.cc).
#include "launcher/cli/agent_command.h"
