"""The agent service: trials (the ReAct loop), built-in agents, the trial store."""
