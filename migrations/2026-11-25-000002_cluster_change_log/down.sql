DROP TABLE cluster_change_log;
