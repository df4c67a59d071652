# filled by the checkpoint work
