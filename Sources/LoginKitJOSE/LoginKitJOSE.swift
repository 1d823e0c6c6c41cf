// LoginKitJOSE: base64url, JWS/JWT, JWK/JWKS, signatures and AES-256-GCM over OpenSSL (issue 3).
