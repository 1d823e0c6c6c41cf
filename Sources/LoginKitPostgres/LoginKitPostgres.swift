// LoginKitPostgres: PostgresTokenStore for fleets (issue 10).
import LoginKit
