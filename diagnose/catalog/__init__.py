"""The check catalog (one file per check under ``checks/``), the ids the stages emit, the Xid catalog."""
