DROP TABLE cluster_credentials;
DROP TABLE firewall_rules;
DROP TABLE elastic_ips;
DROP TABLE nodes;
DROP TABLE node_pools;
DROP TABLE clusters;
DROP FUNCTION kubesvc_are_dns_labels(text[]);
DROP FUNCTION kubesvc_is_dns_label(text);
