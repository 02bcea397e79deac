# Sourced by the project's scripts: where the locally built Pulumi tools live,
# and the settings that keep Pulumi local and quiet (no cloud backend, no
# update checks, no prompts). Safe to source from any folder.
_wb_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WB_TOOLS="${WB_TOOLS:-$_wb_root/.tools}"
export PULUMI_HOME="${PULUMI_HOME:-$WB_TOOLS/pulumi-home}"
export PATH="$WB_TOOLS/bin:$PATH"
export PULUMI_SKIP_UPDATE_CHECK=1
export PULUMI_DIY_BACKEND_NO_LOCK_WARNING=1
unset _wb_root
