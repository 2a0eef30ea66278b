-- AuditRecordInsert appends one record to the audit trail, in the
-- transaction of the change it records.
-- name: AuditRecordInsert :exec
INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
VALUES (@user_id, @action, @resource_type, @resource_id, @data);
