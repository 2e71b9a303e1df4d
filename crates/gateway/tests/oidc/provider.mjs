// A loopback OpenID provider for the gateway's tests (oidc-provider@9.13.3).
// Settings (environment): PORT, REDIRECT_URIS (comma-separated), KID, KEY_FILE (where the
// private signing key is written as PEM, so tests can forge tokens signed by the real key),
// JWT_API (the resource whose access tokens are RS256 JWTs).
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const PORT = Number(process.env.PORT || 3900);
const ISSUER = `http://127.0.0.1:${PORT}`;
const JWT_API = process.env.JWT_API || 'https://api.test/';
const REDIRECT_URIS = (process.env.REDIRECT_URIS || 'http://127.0.0.1:8765/callback').split(',');
const KID = process.env.KID || 'test-rs256';

const ACCOUNTS = {
  alice: { email: 'alice@example.com', role: 'admin', groups: ['devs', 'ops'] },
};

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
if (process.env.KEY_FILE) {
  writeFileSync(process.env.KEY_FILE, privateKey.export({ format: 'pem', type: 'pkcs1' }));
}
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: KID, use: 'sig', alg: 'RS256' };

const provider = new Provider(ISSUER, {
  jwks: { keys: [jwk] },
  cookies: { keys: ['not-a-secret-test-only'] },
  clients: [{
    client_id: 'svc',
    client_secret: 'svc-secret',
    grant_types: ['client_credentials', 'authorization_code'],
    response_types: ['code'],
    redirect_uris: REDIRECT_URIS,
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  scopes: ['openid', 'profile', 'email', 'read'],
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'role', 'groups'],
    email: ['email'],
  },
  // The scopes' claims go into the ID token itself, so the gateway needs no userinfo call.
  conformIdTokenClaims: false,
  async findAccount(ctx, sub) {
    const a = ACCOUNTS[sub] || { email: `${sub}@example.com`, role: 'user', groups: [] };
    return {
      accountId: sub,
      async claims() {
        return { sub, preferred_username: sub, email: a.email, role: a.role, groups: a.groups };
      },
    };
  },
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => JWT_API,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: 'read',
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
provider.listen(PORT, '127.0.0.1', () => console.log(`oidc-provider listening on ${ISSUER}`));
