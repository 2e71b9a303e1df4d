DROP FUNCTION kubesvc_ensure_month_partitions(regclass, text, timestamptz, integer);
