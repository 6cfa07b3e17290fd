"""Task families, the task table and task-support strategies."""
