-- claij store schema 7 (SQLite): who gave each definition.
--
-- `operator`: named on a command line, added with `claij defs add`, or stored by the
-- operator's own runs; its states may touch what the process can. `client`: registered
-- over the network (`POST /definitions`); its states touch only what the operator's
-- policy allows. Definitions stored before this migration are taken to be clients': the
-- store cannot tell, and a client's is the safe guess (the operator's own documents
-- become the operator's again as soon as a command names them; see docs/SECURITY.md).
ALTER TABLE definitions ADD COLUMN owner TEXT NOT NULL DEFAULT 'client'
    CHECK (owner IN ('operator', 'client'));
