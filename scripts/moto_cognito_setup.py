"""Creates a Cognito user pool, an app client and a user in a moto server; prints shell variables."""
import secrets
import sys

import boto3

endpoint = sys.argv[1]
region = "us-east-1"
client = boto3.client(
    "cognito-idp",
    endpoint_url=endpoint,
    region_name=region,
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)
pool = client.create_user_pool(PoolName="loginkit-test")["UserPool"]
app = client.create_user_pool_client(
    UserPoolId=pool["Id"],
    ClientName="loginkit-cli",
    ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
)["UserPoolClient"]
username = "alice"
# Every class the default policy asks for (upper, lower, digit, symbol), whatever the random part holds.
password = "Pw-7" + secrets.token_urlsafe(12)
client.admin_create_user(UserPoolId=pool["Id"], Username=username, MessageAction="SUPPRESS")
client.admin_set_user_password(UserPoolId=pool["Id"], Username=username, Password=password, Permanent=True)

print(f"LOGINKIT_TEST_COGNITO_ENDPOINT={endpoint}")
print(f"LOGINKIT_TEST_COGNITO_REGION={region}")
print(f"LOGINKIT_TEST_COGNITO_POOL_ID={pool['Id']}")
print(f"LOGINKIT_TEST_COGNITO_CLIENT_ID={app['ClientId']}")
print(f"LOGINKIT_TEST_COGNITO_USERNAME={username}")
print(f"LOGINKIT_TEST_COGNITO_PASSWORD={password}")
