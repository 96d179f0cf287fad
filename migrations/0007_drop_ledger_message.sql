-- No query looks ledger entries up by message: the ledger is read by partner (ledger_partner)
-- and a message's money from its own row (price, refunded). The index only cost every send an
-- entry and its commit a few more WAL pages (the accept benchmark: +1-3 %, within its noise).
DROP INDEX IF EXISTS `ledger_message`;
